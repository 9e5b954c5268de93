"""Thread-block clusters (kernels_lab/clusters.py) and the cluster softmax (topics/softmax/cluster.py).

On the simulator a cluster's blocks run side by side, DSMEM is the other block's shared array and the cluster
barrier a real barrier: the same kernels as on a GPU, at small widths. The PTX of every intrinsic is compiled
for sm_90 in a child on the PTX back-end and assembled with ptxas where it is installed.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kernels_lab import clusters
from kernels_lab.arrays import ArgumentError, poisoned, to_device
from kernels_lab.checks import compare
from kernels_lab.clusters import (ClusterError, cluster_arrive, cluster_launcher, cluster_rank, cluster_refusal,
                                  cluster_sync, cluster_wait, dsmem_load)
from kernels_lab.core import get_workload
from kernels_lab.intrinsics import nanosleep
from kernels_lab.runtime import ON_GPU, ON_SIMULATOR, cuda
from kernels_lab.topics.softmax import cluster as cl
from kernels_lab.topics.softmax import cluster_probe as probe

ROOT = Path(__file__).resolve().parents[1]
W = get_workload("softmax")
sim_only = pytest.mark.skipif(not ON_SIMULATOR, reason="the simulator's cluster model")


# -- the intrinsics -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("k,count", [(2, 2), (3, 1), (4, 1)])
def test_ranks_sizes_and_dsmem_loads_and_stores(k, count):
    # every block: its rank, k, its cluster; the next block's value by DSMEM load; the previous block's by store
    found = probe.probe_ranks(k, count)
    assert found["ok"], found["first_wrong"]


@cuda.jit
def late_writer(out):
    # rank 1 writes its value late; the barrier must hold rank 0 until it has
    s = cuda.shared.array(1, np.float32)
    r = cluster_rank()
    if cuda.threadIdx.x == 0:
        s[0] = np.float32(-1)
    cluster_sync()
    if r == 1 and cuda.threadIdx.x == 0:
        nanosleep(200_000_000)  # 0.2 s on the simulator: long enough for a barrier that did not wait to show
        s[0] = np.float32(7)
    cluster_arrive()
    cluster_wait()
    if r == 0:
        out[cuda.threadIdx.x] = dsmem_load(s, 0, 1)
    cluster_sync()  # rank 1 does not leave while rank 0 reads its shared memory


def test_the_cluster_barrier_waits_for_every_block():
    out = cuda.to_device(np.zeros(4, np.float32))
    cluster_launcher(late_writer, 2, 4, 2, (out,))()
    assert (out.copy_to_host() == 7).all()


@cuda.jit
def arrives_twice(out):
    cluster_arrive()
    cluster_arrive()


@cuda.jit
def rank_out_of_range(out):
    s = cuda.shared.array(1, np.float32)
    cluster_sync()
    out[0] = dsmem_load(s, 0, 2)


@cuda.jit
def one_thread_skips(out):
    if cuda.threadIdx.x != 1:
        cluster_sync()


@sim_only
@pytest.mark.parametrize("kernel,words", [(arrives_twice, "twice"), (rank_out_of_range, "rank 2 of a cluster of 2")])
def test_undefined_cluster_operations_are_errors(kernel, words):
    with pytest.raises(Exception, match=words):
        cluster_launcher(kernel, 2, 2, 2, (cuda.to_device(np.zeros(1, np.float32)),))()


@sim_only
def test_a_thread_that_never_reaches_the_barrier_is_an_error_not_a_hang(monkeypatch):
    monkeypatch.setattr(clusters, "BARRIER_LIMIT_S", 1.0)
    with pytest.raises(Exception, match="never arrived"):
        cluster_launcher(one_thread_skips, 2, 2, 2, (cuda.to_device(np.zeros(1, np.float32)),))()


@cuda.jit
def second_block_fails(out):
    cluster_sync()
    if cluster_rank() == 1 and cuda.threadIdx.x == 0:
        out[5] = 1.0  # out holds 1 float: an IndexError on the simulator, before this thread's second arrival
    cluster_sync()


@sim_only
def test_a_block_that_fails_stops_its_cluster_at_once_and_its_error_is_the_one_raised(monkeypatch):
    monkeypatch.setattr(clusters, "BARRIER_LIMIT_S", 60.0)
    start = time.monotonic()
    with pytest.raises(IndexError):  # the cause; block 0 stopped waiting with a ClusterAborted, not raised
        cluster_launcher(second_block_fails, 2, 2, 2, (cuda.to_device(np.zeros(1, np.float32)),))()
    assert time.monotonic() - start < 10  # not the barrier's limit: block 0 sees block 1's failure


@cuda.jit
def fails_before_arriving(out):
    if cluster_rank() == 1 and cuda.threadIdx.x == 0:
        out[5] = 1.0  # out holds 1 float: this thread never arrives; its block's other thread waits for it
    cluster_sync()


@cuda.jit
def a_thread_outlives_its_launch(a, out, fail):
    b, tid = cuda.blockIdx.x, cuda.threadIdx.x
    if fail[0] == 0.0:
        time.sleep(0.4)  # launch 2: its threads reach their first barrier after the stale thread does
    cluster_sync()
    if fail[0] == 1.0 and b == 1 and tid == 1:
        out[a.size + 100] = 1.0  # launch 1 fails here
    if fail[0] == 1.0 and b == 0 and tid == 0:
        time.sleep(0.2)  # still running when launch 1 has reported and launch 2 has started
    cluster_sync()
    out[b * 2 + tid] = a[b * 2 + tid]


@sim_only
def test_a_thread_failing_before_it_arrives_is_the_error_raised(monkeypatch):
    monkeypatch.setattr(clusters, "BARRIER_LIMIT_S", 60.0)
    start = time.monotonic()
    with pytest.raises(IndexError):
        cluster_launcher(fails_before_arriving, 2, 2, 2, (cuda.to_device(np.zeros(1, np.float32)),))()
    assert time.monotonic() - start < 10


@sim_only
def test_a_thread_left_running_by_a_failed_launch_stays_out_of_the_next(monkeypatch):
    # numba does not join a failed block's threads: one still running must not arrive at the next launch's barrier
    monkeypatch.setattr(clusters, "BARRIER_LIMIT_S", 20.0)
    a = np.arange(4, dtype=np.float32) + 1
    with pytest.raises(IndexError):
        cluster_launcher(a_thread_outlives_its_launch, 2, 2, 2, (a, np.zeros(4, np.float32), np.ones(1, np.float32)))()
    out = np.zeros(4, np.float32)
    cluster_launcher(a_thread_outlives_its_launch, 2, 2, 2, (a, out, np.zeros(1, np.float32)))()
    assert np.array_equal(out, a)


@sim_only
def test_a_cluster_operation_outside_a_cluster_launch_is_an_error():
    out = cuda.to_device(np.zeros(1, np.float32))
    with pytest.raises(Exception, match="outside a cluster launch"):
        arrives_twice[1, 1](out)


def test_launch_shapes_and_old_gpus_are_refused_naming_the_need():
    out = cuda.to_device(np.zeros(1, np.float32))
    with pytest.raises(ClusterError, match="not a whole number of clusters"):
        cluster_launcher(arrives_twice, 3, 2, 2, (out,))
    with pytest.raises(ClusterError, match="at most 16"):
        cluster_launcher(arrives_twice, 32, 2, 32, (out,))
    with pytest.raises(ClusterError, match="1-D grid"):
        cluster_launcher(arrives_twice, (2, 1), 2, 2, (out,))
    why = cluster_refusal((8, 0))
    assert "compute capability >= 9.0" in why and "8.0" in why and "\n" not in why
    assert cluster_refusal((9, 0)) is None


@sim_only
def test_the_simulator_internals_clusters_touch_are_where_they_were():
    # clusters.py reads the launch in progress and its shared arrays from numba-cuda 0.30's simulator
    from numba.cuda.simulator import kernel, kernelapi
    assert hasattr(kernel, "_kernel_context")
    module = kernelapi.FakeCUDAModule((1, 1, 1), (1, 1, 1), 0)
    assert isinstance(module._shared._allocations, dict)
    assert {"blockIdx", "_manager", "abort"} <= set(vars(kernel.BlockThread(lambda: None, _Manager(), (0, 0, 0),
                                                                           (0, 0, 0), False)))


class _Manager:
    _block_dim = (1, 1, 1)


# -- the PTX: sm_90, and what it contains ------------------------------------------------------------------

PTX_CHILD = r"""
import re, sys
from numba import types
from kernels_lab.capabilities import compile_ptx
from kernels_lab.topics.softmax import cluster as cl, cluster_probe as cp
f32 = types.float32[::1]
from kernels_lab.topics.softmax import cross_entropy_cluster as cec
from kernels_lab.topics.layernorm import cluster as lcl, staged as st
from kernels_lab.topics.softmax import staged as sst
kernels = [(cp.ranks_kernel, (f32,)), (cp.dynamic_kernel, (f32, types.int64)),
           (cl.cluster_kernel(cl.ClusterShape(4, 128, 4)), (f32, f32, types.int64, types.int64, types.int64)),
           (cec.ce_cluster_kernel(cec.ce_cluster_shape(50257)),
            (f32, types.int32[::1], f32, types.int64, types.int64, types.int64)),
           (lcl.layernorm_cluster_kernel(cl.ClusterShape(4, 128, 4)),
            (f32, f32, f32, f32, types.int64, types.int64, types.int64, types.float32)),
           (lcl.layernorm_chan_kernel(cl.ClusterShape(4, 128, 4)),
            (f32, f32, f32, f32, types.int64, types.int64, types.int64, types.float32)),
           (st.layernorm_staged_kernel(cl.ClusterShape(4, 128, 4)),
            (f32, f32, f32, f32, types.int64, types.int64, types.int64, types.float32)),
           (st.layernorm_staged_kernel(cl.ClusterShape(4, 128, 4), 3, True),
            (f32, f32, f32, f32, types.int64, types.int64, types.int64, types.float32)),
           (sst.softmax_staged_kernel(cl.ClusterShape(4, 128, 4)), (f32, f32, types.int64, types.int64, types.int64)),
           (sst.softmax_staged_kernel(cl.ClusterShape(4, 128, 4), 2, True),
            (f32, f32, types.int64, types.int64, types.int64)),
           (lcl.cluster_kernel(cl.ClusterShape(4, 128, 4)),  # the registered `cluster` (v9: the warp's vote)
            (f32, f32, f32, f32, types.int64, types.int64, types.int64, types.float32))]
for i, (k, sig) in enumerate(kernels):
    ptx = compile_ptx(k.py_func, sig, cc=(9, 0))
    open(sys.argv[1] + f"/k{i}.ptx", "w").write(ptx)
"""


@pytest.mark.skipif(ON_GPU, reason="compiled on the GPU by every GPU test")
def test_the_intrinsics_compile_for_sm90_and_assemble(tmp_path):
    from kernels_lab import capabilities
    libs = capabilities.ptx_libraries()
    if not libs.available:
        pytest.skip(f"no PTX compiler here: {libs.detail}")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env.update(KERNELS_LAB_BACKEND="ptx", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", PTX_CHILD, str(tmp_path)], check=True, env=env, timeout=300)
    texts = [(tmp_path / f"k{i}.ptx").read_text() for i in range(11)]
    for needed in ("%cluster_ctarank", "%cluster_nctarank", "%clusterid.x", "mapa.shared::cluster.u32",
                   "ld.shared::cluster.f32", "st.shared::cluster.f32", "barrier.cluster.arrive.release",
                   "barrier.cluster.wait.acquire"):
        assert needed in texts[0], needed
    assert "vote.sync.all.pred" in texts[10]  # v9's vote: a warp takes the test-free path or none of it
    for text in texts[2:]:  # the softmax, cross-entropy and layernorm (v1, v3, v9) kernels
        assert "st.shared::cluster.f32" in text and "barrier.cluster.wait.acquire" in text
    for text, wait in zip(texts[6:], ("wait_group 1", "wait_group 2", "wait_group 1", "wait_group 1")):
        for needed in ("cp.async.cg.shared.global", "cp.async.commit_group", f"cp.async.{wait};", "ld.shared.v4.f32"):
            assert needed in text, needed  # v6, v7 (3 stages), v20, v21: slices staged by asynchronous copies
    if shutil.which("ptxas") is None:
        return
    for i, text in enumerate(texts):
        # an older ptxas than NVVM's ISA: the instructions need ISA 7.8 (sm_90), which every ptxas for sm_90 takes
        path = tmp_path / f"k{i}_80.ptx"
        path.write_text(re.sub(r"^\.version \S+", ".version 8.0", text, flags=re.M))
        done = subprocess.run(["ptxas", "-arch=sm_90", str(path), "-o", os.devnull], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    old = tmp_path / "k0_sm80.ptx"
    old.write_text(re.sub(r"^\.target \S+", ".target sm_80", (tmp_path / "k0_80.ptx").read_text(), flags=re.M))
    done = subprocess.run(["ptxas", "-arch=sm_80", str(old), "-o", os.devnull], capture_output=True, text=True)
    assert done.returncode != 0 and "requires .target sm_90" in done.stderr


# -- the cluster softmax ---------------------------------------------------------------------------------------

def _run(rows, cols, shape, rng, scale=1.0, clusters_=None, whole=False):
    inputs = W.make_inputs(W.size(rows=rows, cols=cols), rng)
    inputs["x"] *= np.float32(scale)
    out = poisoned(W.output_specs(W.size(rows=rows, cols=cols)))
    cl.bind_cluster(to_device(inputs), out, shape=shape, clusters=clusters_, whole=whole)()
    _, bad = compare("out", out["out"].copy_to_host(), W.reference(inputs)["out"], W.tolerance)
    return inputs, bad


@pytest.mark.parametrize("what,rows,cols,slices,threads,clusters_,scale", [
    ("2 blocks, odd width (a multiple of neither 4 nor 32), a cluster per row", 3, 67, 2, 32, None, 1.0),
    ("3 blocks (k need not be a power of two), 2 clusters striding over 5 rows", 5, 131, 3, 32, 2, 1.0),
    ("4 blocks, the last with no columns of the row, rows near +-6400", 2, 17, 4, 32, None, 64.0),
    ("1 block: the cluster of one", 3, 66, 1, 32, None, 1.0),
    ("8 blocks, 2 chunks a thread", 2, 2001, 8, 32, 1, 1.0),
])
def test_cluster_softmax_matches_float64(what, rows, cols, slices, threads, clusters_, scale, rng):
    shape = cl.cluster_shape(cols, slices=slices, threads=threads)
    inputs, bad = _run(rows, cols, shape, rng, scale, clusters_)
    assert bad is None, f"{what}: {bad}"
    if rows >= 2 and scale == 1.0:  # the rows that overflow or underflow exp without the max subtracted
        assert inputs["x"][0].min() > 88.8 and inputs["x"][1].max() < -104


@pytest.mark.parametrize("what,rows,cols,slices,threads,clusters_,scale", [
    ("2 blocks of one warp, 2 chunks a thread, every lane inside the row: the vote is yes", 3, 512, 2, 32, None, 1.0),
    ("the same, 2 clusters striding over 5 rows near +-6400", 5, 512, 2, 32, 2, 64.0),
    ("2 blocks of two warps: warp 0 could skip the tests, warp 1 cannot (each decides alone)", 3, 832, 2, 64, None,
     1.0),
    ("odd width: no warp may skip them", 3, 1003, 2, 32, None, 1.0),
    ("width 250: block 0's lanes all lie inside row 0, but row 1 starts off a 16-byte boundary", 3, 250, 2, 32, None,
     1.0),
    ("width 504: lane 31's last vector is the slice's last (the vote is yes only with < end)", 3, 504, 2, 32, None,
     1.0),
])
def test_v22_skips_the_tests_only_where_a_whole_warp_is_inside_the_row(what, rows, cols, slices, threads, clusters_,
                                                                        scale, rng):
    shape = cl.cluster_shape(cols, slices=slices, threads=threads)
    _, bad = _run(rows, cols, shape, rng, scale, clusters_, whole=True)
    assert bad is None, f"{what}: {bad}"


def test_the_registered_variant_takes_its_layout_from_the_width(rng):
    # simulator widths: several blocks a row (slices of cl.SLICE_FLOATS), the one path a GPU takes
    inputs, bad = _run(2, 203, None, rng)
    assert bad is None, bad
    assert cl.cluster_shape(203).slices > 1 if ON_SIMULATOR else True


MEASURED = ROOT / "figures" / "data" / "softmax_cluster_h200.json"


def _best_measured_layouts() -> dict[int, str]:
    """Width -> the name of the cluster layout with the highest fraction of the copy ceiling in the committed run."""
    records = json.loads(MEASURED.read_text())["records"]
    best: dict[int, dict] = {}
    for r in records:
        if r["workload"] == "softmax" and re.fullmatch(r"cluster\d+_\d+x\d+( \(default\))?", r["version"]) and \
                r["of_ceiling"] > best.get(r["cols"], {"of_ceiling": -1})["of_ceiling"]:
            best[r["cols"]] = r
    return {cols: r["version"].split()[0] for cols, r in best.items()}


def test_the_default_layout_is_the_best_measured_at_every_measured_width():
    best = _best_measured_layouts()
    assert sorted(best) == [w for w, _, _ in cl.MEASURED_LAYOUTS]  # the table covers every measured width
    for cols, name in best.items():
        assert probe.name_of(cl.cluster_shape(cols)) == name, cols


def test_layouts_between_and_past_the_measured_widths():
    widths = [w for w, _, _ in cl.MEASURED_LAYOUTS]
    for lo, hi in zip(widths, widths[1:]):
        for cols in (lo + 1, (lo + hi) // 2, hi - 3):  # the next measured width's blocks, holding this row
            s, measured = cl.cluster_shape(cols), cl.cluster_shape(hi)
            # just under a measured width, a row that starts unaligned takes one vector more: more threads then
            assert s.slices == measured.slices and s.threads >= measured.threads, cols
            assert s.threads == measured.threads or cols % 4, cols
            assert s.slice_vectors(cols) <= s.threads * s.chunks, cols  # every vector of a slice has a thread
    assert cl.cluster_shape(widths[0] - 1).slices == cl.portable_slices(widths[0] - 1)
    widest = cl.MAX_CLUSTER * 1024 * 8 * 4  # past the widest measured width: 16 blocks, threads grow to 1024
    assert cl.cluster_shape(widths[-1] + 4).slices == cl.MAX_CLUSTER
    assert cl.cluster_shape(widest - 6) is not None  # the row's unaligned start takes one vector more
    assert cl.cluster_shape(widest + 4) is None
    assert cl.cluster_shape(8 * 1024 * 8 * 4 + 4, slices=8) is None
    why = W.variant("cluster").why_not(W.size(rows=1, cols=widest + 4))
    assert why is not None and "`online`" in why and str(widest) in why


@pytest.mark.gpu
@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("cols", [8192, 50257, 131072, 262138])
def test_cluster_softmax_on_the_gpu_at_real_widths(cols, whole, rng):
    for shape in (None, cl.cluster_shape(cols, slices=4)):
        if shape is None and cl.cluster_shape(cols) is None:
            continue
        _, bad = _run(9, cols, shape, rng, scale=64.0, whole=whole)
        assert bad is None, f"{shape}, v22 {whole}: {bad}"


# -- the cluster cross-entropy ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,cols,clusters_", [(3, 67, None), (5, 131, 2), (2, 17, None)])
def test_cluster_cross_entropy_matches_float64(rows, cols, clusters_, rng):
    # labels at the first and last columns among them; 2 clusters (of 4 blocks at 131 columns) striding over
    # 5 rows use both slots and reuse one. 1, 2 and 4 blocks a row here (8 blocks, twice the simulated threads
    # and 3x the time, run in the cluster softmax's test above)
    from kernels_lab.topics.softmax import cross_entropy as ce
    from kernels_lab.topics.softmax import cross_entropy_cluster as cec
    w = get_workload("cross_entropy")
    size = w.size(rows=rows, cols=cols)
    inputs = w.make_inputs(size, rng)
    outputs = poisoned(w.output_specs(size))
    shape = cec.ce_cluster_shape(cols)
    assert shape.slices > 1 or cols <= cl.SLICE_FLOATS  # several blocks a row at the simulator's widths too
    if clusters_ is None:
        cec.bind_ce_cluster(to_device(inputs), outputs)()
    else:
        x, labels, loss, _, _ = ce.checked(to_device(inputs), outputs)
        cluster_launcher(cec.ce_cluster_kernel(shape), clusters_ * shape.slices, shape.threads, shape.slices,
                         (x.reshape(rows * cols), labels, loss, rows, cols, shape.slice_vectors(cols)))()
    _, bad = compare("loss", outputs["loss"].copy_to_host(), w.reference(inputs)["loss"], w.tolerance)
    assert bad is None, bad


# -- the cluster layernorm ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("what,rows,cols,slices,clusters_,version", [
    ("the registered kernel (v9) at the width's layout (several blocks a row on the simulator), odd width, a "
     "cluster per row", 3, 203, None, None, 9),
    ("3 blocks, 2 clusters striding over 5 rows (each statistic's slot reused)", 5, 131, 3, 2, 3),
    ("v9, 4 blocks, the last with no columns of the row", 2, 17, 4, None, 9),
    ("2 blocks, 4 chunks a thread (the GPU layouts' loop over chunks), rows not 16-byte aligned", 3, 1003, 2, None, 3),
    ("the study's v1: 3 blocks, 2 clusters, 5 rows", 5, 131, 3, 2, 1),
    ("the study's v2: 3 blocks, 2 clusters, 5 rows", 5, 131, 3, 2, 2),
    ("v8, width a multiple of 4: 3 blocks, 2 clusters, 5 rows; 11 threads a block take the test-free path", 5, 132,
     3, 2, 8),
    ("v8, 2 blocks, 4 chunks a thread, width a multiple of 4 (the test-free path over chunks)", 3, 1004, 2, None, 8),
    ("v8, odd width: every thread takes the tested path", 3, 1003, 2, None, 8),
    ("v9, width a multiple of 4: 3 blocks, 2 clusters, 5 rows; the warp's vote sends all 32 lanes down the tested "
     "path (11 could take the other)", 5, 132, 3, 2, 9),
    ("v9, 2 blocks, 4 chunks a thread, width a multiple of 4: every lane in the row, the vote is yes", 3, 1024, 2, None,
     9),
    ("v9, width 250 (rows after the first start off a 16-byte boundary): a slice's lanes could all vote yes, the "
     "width must not let them", 3, 250, 2, None, 9),
])
def test_cluster_layernorm_matches_float64(what, rows, cols, slices, clusters_, version, rng):
    from kernels_lab.topics.layernorm import cluster as lcl
    w = get_workload("layernorm")
    size = w.size(rows=rows, cols=cols)
    inputs = w.make_inputs(size, rng)  # rows centred up to +-20: E[x^2] - mean^2 would lose digits
    outputs = poisoned(w.output_specs(size))
    shape = None if slices is None else cl.cluster_shape(cols, slices=slices, threads=32)
    assert (shape or cl.cluster_shape(cols)).slices > 1
    lcl.bind_cluster(to_device(inputs), outputs, shape=shape, clusters=clusters_, version=version)()
    _, bad = compare("out", outputs["out"].copy_to_host(), w.reference(inputs)["out"], w.tolerance)
    assert bad is None, f"v{version}, {what}: {bad}"


def test_the_cluster_layernorm_is_registered_and_refuses_what_it_cannot_hold():
    w = get_workload("layernorm")
    assert "cluster" in w.variants
    widest = cl.MAX_CLUSTER * 1024 * 8 * 4
    why = w.variant("cluster").why_not(w.size(rows=1, cols=widest + 4))
    assert why is not None and "`unfused`" in why
    plan = w.variant("cluster").plan(w.size(rows=3, cols=203))
    assert plan.n_launches == 1 and plan.bytes_total == 4 * 3 * 203 * 4  # x, gamma, beta read; out written


def test_the_half_held_layouts_hold_the_row_in_half_the_floats_a_thread():
    from kernels_lab.topics.layernorm import cluster as lcl
    for shape in (cl.ClusterShape(2, 512, 8), cl.ClusterShape(16, 256, 8)):
        half = lcl.half_held(shape)
        assert half.chunks * 2 == shape.chunks and half.slices * half.threads == 2 * shape.slices * shape.threads
        assert half.slices <= cl.MAX_CLUSTER
    assert lcl.half_held(cl.ClusterShape(2, 512, 8)) == cl.ClusterShape(4, 512, 4)  # more blocks a row first
    assert lcl.half_held(cl.ClusterShape(16, 256, 8)) == cl.ClusterShape(16, 512, 4)  # the cluster is full
    assert lcl.half_held(cl.ClusterShape(16, 1024, 8)) is None  # no block of 2048 threads
    assert cl.cluster_shape(1003, slices=2, threads=32).chunks == 4  # the float64 test's case with 4 chunks


@pytest.mark.gpu
@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("cols", [16385, 65536, 131071])
def test_cluster_layernorm_on_the_gpu_at_real_widths(cols, version, rng):
    from kernels_lab.topics.layernorm import cluster as lcl
    w = get_workload("layernorm")
    size = w.size(rows=5, cols=cols)
    inputs = w.make_inputs(size, rng)
    outputs = poisoned(w.output_specs(size))
    lcl.bind_cluster(to_device(inputs), outputs, version=version)()
    _, bad = compare("out", outputs["out"].copy_to_host(), w.reference(inputs)["out"], w.tolerance)
    assert bad is None, f"v{version}: {bad}"


@pytest.mark.parametrize("what,rows,cols,slices,clusters_,threads", [
    ("2 blocks of 4 chunks a thread, one cluster striding over 3 rows: every row's output from the weights "
     "each block copied once", 3, 1024, 2, 1, 32),
    ("2 blocks of 8 chunks, 2 clusters over 5 rows (each block's slice of the weights, not block 0's)", 5, 2048, 2,
     2, 32),
    ("3 blocks, 2 clusters, 5 rows, a width a multiple of 4 whose slices' lanes vote no: the tested path", 5, 132, 3,
     2, 32),
    ("width 250: rows start off a 16-byte boundary, no weights copied, the tested path", 3, 250, 2, 1, 32),
    ("the width's layout (v4's), a cluster per row", 3, 1000, None, None, 32),
    ("2 blocks of 64 threads: warp 0 votes for the whole-vector path, warp 1 (lanes 58-63 past the slice) for the "
     "tested one, in the same block", 3, 2000, 2, 1, 64),
])
def test_the_onchip_cluster_layernorm_matches_float64(what, rows, cols, slices, clusters_, threads, rng):
    from kernels_lab.topics.layernorm import onchip
    w = get_workload("layernorm")
    size = w.size(rows=rows, cols=cols)
    inputs = w.make_inputs(size, rng)
    outputs = poisoned(w.output_specs(size))
    shape = None if slices is None else cl.cluster_shape(cols, slices=slices, threads=threads)
    onchip.bind_onchip(to_device(inputs), outputs, shape=shape, clusters=clusters_)()
    _, bad = compare("out", outputs["out"].copy_to_host(), w.reference(inputs)["out"], w.tolerance)
    assert bad is None, f"v10, {what}: {bad}"


@pytest.mark.gpu
@pytest.mark.parametrize("resident", [1536, 1024], ids=["v10", "v11"])
@pytest.mark.parametrize("rows,cols", [(5, 16385), (700, 16384), (300, 65536), (100, 131072), (100, 131071)])
def test_the_onchip_cluster_layernorm_on_the_gpu(rows, cols, resident, rng):
    from kernels_lab.topics.layernorm import onchip
    w = get_workload("layernorm")
    size = w.size(rows=rows, cols=cols)
    inputs = w.make_inputs(size, rng)
    outputs = poisoned(w.output_specs(size))
    onchip.bind_onchip(to_device(inputs), outputs, resident=resident)()
    _, bad = compare("out", outputs["out"].copy_to_host(), w.reference(inputs)["out"], w.tolerance)
    assert bad is None, f"resident {resident}, {rows} x {cols}: {bad}"


# -- v6: slices staged through shared memory by asynchronous copies ----------------------------------------------

def _staged(rows, cols, slices, clusters_, rng, threads=32, stages=2, held=False):
    from kernels_lab.topics.layernorm import staged as st
    w = get_workload("layernorm")
    size = w.size(rows=rows, cols=cols)
    inputs = w.make_inputs(size, rng)
    outputs = poisoned(w.output_specs(size))
    shape = None if slices is None else cl.cluster_shape(cols, slices=slices, threads=threads)
    st.bind_staged(to_device(inputs), outputs, shape=shape, clusters=clusters_, stages=stages, held=held)()
    return compare("out", outputs["out"].copy_to_host(), w.reference(inputs)["out"], w.tolerance)[1]


@pytest.mark.parametrize("held", [False, True], ids=["v6", "v7"])
@pytest.mark.parametrize("what,rows,cols,slices,clusters_,stages", [
    ("3 blocks, 2 clusters striding over 5 rows: each row copied while the one before is reduced", 5, 131, 3, 2, 2),
    ("one cluster for 3 rows of 4 chunks a thread, rows not 16-byte aligned, x's last vector short", 3, 1003, 2, 1, 2),
    ("the width's layout, a cluster per row (no next row to copy)", 3, 203, None, None, 2),
    ("three stages: two rows in flight, 2 clusters over 7 rows (a cluster's last rows copy nothing)", 7, 67, 2, 2, 3),
])
def test_the_staged_cluster_layernorm_matches_float64(what, rows, cols, slices, clusters_, stages, held, rng):
    bad = _staged(rows, cols, slices, clusters_, rng, stages=stages, held=held)
    assert bad is None, f"v{7 if held else 6}, {what}: {bad}"


@sim_only
@pytest.mark.parametrize("wait", ["none", "too few groups"])
def test_a_staged_read_before_its_wait_is_wrong_on_the_simulator(monkeypatch, rng, wait):
    """The simulator makes a copy when its group is waited for: a kernel that reads a stage before waiting for it
    (no wait, or a wait that leaves this row's group in flight) reads old contents."""
    from kernels_lab.topics.softmax import staged as sst
    waited = sst.async_wait_group
    monkeypatch.setattr(sst, "async_wait_group", (lambda n: None) if wait == "none" else (lambda n: waited(n + 1)))
    assert _staged(5, 131, 3, 2, rng) is not None


def test_the_staged_layout_fills_a_block_with_two_rows_of_32_kb_slices():
    from kernels_lab.topics.softmax import staged as st
    for cols, slices, threads in ((32768, 4, 256), (131072, 16, 256), (262144, 16, 512)):
        shape = st.staged_layout(cols)
        assert (shape.slices, shape.threads, shape.chunks) == (slices, threads, 8)
        assert st.stage_bytes(shape) == 2 * 16 * threads * 8


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols", [(5, 4099), (3000, 4099), (5, 16385), (700, 16385), (5, 65536), (300, 65536),
                                       (5, 131071), (100, 131071)])  # and enough rows that clusters stride
@pytest.mark.parametrize("held", [False, True], ids=["v6", "v7"])
def test_the_staged_cluster_layernorm_on_the_gpu(rows, cols, held, rng):
    bad = _staged(rows, cols, None, None, rng, held=held)
    assert bad is None, f"v{7 if held else 6} at {rows} x {cols}: {bad}"


def _staged_softmax(rows, cols, slices, clusters_, rng, scale=1.0, held=False, stages=2):
    from kernels_lab.topics.softmax import staged as sst
    inputs = W.make_inputs(W.size(rows=rows, cols=cols), rng)
    inputs["x"] *= np.float32(scale)
    out = poisoned(W.output_specs(W.size(rows=rows, cols=cols)))
    shape = None if slices is None else cl.cluster_shape(cols, slices=slices, threads=32)
    sst.bind_staged(to_device(inputs), out, shape=shape, clusters=clusters_, held=held, stages=stages)()
    return compare("out", out["out"].copy_to_host(), W.reference(inputs)["out"], W.tolerance)[1]


@pytest.mark.parametrize("what,rows,cols,slices,clusters_,scale,stages", [
    ("3 blocks, 2 clusters striding over 5 rows, odd width", 5, 131, 3, 2, 1.0, 2),
    ("4 blocks, the last with no columns of the row, one cluster for both rows near +-6400", 2, 17, 4, 1, 64.0, 2),
    ("2 blocks, 4 chunks a thread, 3 rows through one cluster, x's last vector short", 3, 1003, 2, 1, 1.0, 2),
    ("three stages: 2 clusters over 7 rows, two rows in flight", 7, 67, 2, 2, 1.0, 3),
])
@pytest.mark.parametrize("held", [False, True], ids=["v20", "v21"])
def test_the_staged_cluster_softmax_matches_float64(what, rows, cols, slices, clusters_, scale, stages, held, rng):
    bad = _staged_softmax(rows, cols, slices, clusters_, rng, scale, held, stages)
    assert bad is None, f"staged softmax, {what}: {bad}"


@pytest.mark.gpu
@pytest.mark.parametrize("rows,cols", [(5, 8195), (2000, 8195), (5, 50257), (500, 50257), (7, 131071), (100, 131071),
                                       (3, 262144)])
@pytest.mark.parametrize("held", [False, True], ids=["v20", "v21"])
def test_the_staged_cluster_softmax_on_the_gpu(rows, cols, held, rng):
    bad = _staged_softmax(rows, cols, None, None, rng, held=held)
    assert bad is None, f"staged softmax at {rows} x {cols}: {bad}"


@pytest.mark.parametrize("bind", ["cluster", "v9", "v10", "v6"])
def test_weights_that_do_not_start_on_16_bytes_are_refused_naming_them(bind, rng):
    # the cluster kernels load gamma and beta 16 bytes at a time, as `fused` does (which refuses them too)
    from kernels_lab.topics.layernorm import cluster as lcl, onchip, staged
    binds = {"cluster": lcl.bind_cluster, "v9": functools.partial(lcl.bind_cluster, version=9),
             "v10": onchip.bind_onchip, "v6": staged.bind_staged}
    w = get_workload("layernorm")
    size = w.size(rows=3, cols=1024)
    inputs = to_device(w.make_inputs(size, rng))
    for name in ("gamma", "beta"):
        shifted = dict(inputs, **{name: cuda.to_device(np.zeros(size.cols + 1, np.float32))[1:]})
        with pytest.raises(ArgumentError, match=f"{name}: its device address is not 16-byte aligned"):
            binds[bind](shifted, poisoned(w.output_specs(size)))
