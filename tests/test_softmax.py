"""Softmax on the simulator: the layouts test_workloads.py's default sizes do not reach (a row per
block, several rows per block, several passes of the streaming loop), rows where exp overflows
without the max, the fused limit, argument checks, the reductions in reduce.py, the exercise's
grading, and where NVVM is, a compile of the GPU kernels for sm_90."""

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
import pytest

from kernels_lab import get_workload
from kernels_lab.arrays import ArgumentError, poisoned, to_device
from kernels_lab.checks import check_variant, compare
from kernels_lab.instrument.trace import per_array, tracing
from kernels_lab.reduce import block_md, warp_max, warp_md, warp_sum
from kernels_lab.runtime import ON_GPU, cuda
from kernels_lab.topics.softmax import workload as sm
from kernels_lab.topics.softmax import split as sp
from sources import submission

W = get_workload("softmax")

# (variant, rows, cols) beyond the default sizes: 1000 = 250 16-byte vectors (lanes masked off),
# 1500 a row per block with 16-byte accesses, 1029 a row per block with 4-byte ones
SIZES = [("unfused", 3, 1000), ("fused_shared", 2, 1029), ("fused", 3, 1000), ("fused", 2, 1500),
         ("fused", 2, 1029), ("online", 3, 1000), ("persistent", 3, 1029)]


@pytest.mark.parametrize("variant,rows,cols", SIZES)
def test_variant_matches_float64_and_moves_the_planned_bytes(variant, rows, cols, rng):
    size, v = W.size(rows=rows, cols=cols), W.variant(variant)
    with tracing() as trace:
        result = check_variant(W, v, size, seed=int(rng.integers(2**31)))
    assert result.ok, result.explain()
    plan = v.plan(size)
    assert [(t.kernel, t.grid[0], t.block[0]) for t in trace.launches] == \
        [(k.kernel, k.grid, k.block) for k in plan.launches]
    for traced, planned in zip(trace.launches, plan.launches):
        assert (traced.bytes_read, traced.bytes_written) == (planned.bytes_read, planned.bytes_written), \
            f"{planned.kernel}: traced {per_array(trace)}"


def _run(bind, rows: int, cols: int, rng) -> None:
    inputs = W.make_inputs(W.size(rows=rows, cols=cols), rng)
    out = poisoned(W.output_specs(W.size(rows=rows, cols=cols)))
    bind(to_device(inputs), out)()
    _, bad = compare("out", out["out"].copy_to_host(), W.reference(inputs)["out"], W.tolerance)
    assert bad is None, bad


@pytest.mark.parametrize("what,rows,cols,bind", [
    ("a row per warp, 2 rows a block, the last block half idle", 3, 260,
     lambda i, o: sm.bind_fused(i, o, shape=sm.fused_shape(260, threads=32, block=64))),
    ("a row per block of 64 threads, 4-byte accesses", 3, 301,
     lambda i, o: sm.bind_fused(i, o, shape=sm.fused_shape(301, threads=64))),
    ("persistent, a row per block: 2 blocks stride over 5 rows", 5, 301,
     lambda i, o: sm.bind_fused(i, o, shape=sm.fused_shape(301, threads=64), persistent=True)),
    ("online, 4 passes of its loop, 16-byte accesses", 2, 1000,
     lambda i, o: sm.bind_online(i, o, shape=sm.stream_shape(1000, threads=32, chunks=2))),
    ("online, 3 passes of its loop, 4-byte accesses", 2, 333,
     lambda i, o: sm.bind_online(i, o, shape=sm.stream_shape(333, threads=32, chunks=1))),
])
def test_other_layouts_the_benchmark_compares(what, rows, cols, bind, rng):
    _run(bind, rows, cols, rng)


def test_inputs_have_rows_where_exp_overflows_without_the_max(rng):
    x = W.make_inputs(W.size(rows=7, cols=67), rng)["x"]
    assert x[0].min() > 88.8 and x[1].max() < -104 and np.abs(x[2]).max() < 25  # near +100, -120, and ordinary
    assert x[3].min() > 88.8 and x[6].max() < -104  # then every third row, alternately
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(x[0]) / np.exp(x[0]).sum()
        from_zero = np.exp(x[1]) / np.exp(x[1]).sum()  # a max started at 0 instead of -inf
    assert np.isnan(naive).all()  # exp(100) = inf in float32: inf / inf
    assert np.isnan(from_zero).all()  # exp(-120) = 0 in float32: 0 / 0
    assert np.isfinite(W.reference({"x": x})["out"]).all()


def test_symmetric_inputs_repeat_one_row(rng):
    x = W.symmetric_inputs(W.size(rows=3, cols=5), rng)["x"]
    assert x.shape == (3, 5) and (x == x[0]).all()


def test_fused_refuses_a_row_that_does_not_fit_and_names_online():
    wide = W.size(rows=1, cols=sm.FUSED_MAX_COLS + 4)
    for name in ("fused", "persistent"):
        why = W.variant(name).why_not(wide)
        assert why is not None and "`online`" in why and str(sm.FUSED_MAX_COLS) in why
        assert W.variant(name).why_not(wide.replace(cols=sm.FUSED_MAX_COLS)) is None
    assert W.variant("online").why_not(wide) is None and W.variant("unfused").why_not(wide) is None
    assert "`fused`" in W.variant("fused_shared").why_not(W.size(rows=1, cols=sm.SHARED_COLS + 1))
    x = cuda.to_device(np.zeros((1, wide.cols), np.float32))
    with pytest.raises(ArgumentError, match="`online`"):
        W.variant("fused").bind({"x": x}, {"out": cuda.device_array_like(x)})


def test_layouts_by_width():
    warp, block, widest = sm.fused_shape(1024), sm.fused_shape(4096), sm.fused_shape(sm.FUSED_MAX_COLS)
    assert (warp.threads, warp.chunks, warp.rows_per_block, warp.vector) == (32, 8, sm.WARP_ROWS, True)
    assert (block.threads, block.chunks, block.rows_per_block) == (256, 4, 1)
    assert (widest.threads, widest.chunks) == (1024, 8) and not sm.fused_shape(67).vector
    assert sm.stream_shape(32768).threads == 1024 and sm.stream_shape(67).threads == 32


@pytest.mark.parametrize("variant", list(W.variants))
def test_bad_arguments_get_errors_that_name_them(variant, rng):
    host = W.make_inputs(W.size(rows=2, cols=8), rng)["x"]
    x, out = cuda.to_device(host), cuda.device_array((2, 8), np.float32)
    bind = W.variant(variant).bind
    for inputs, outputs, says in [
            ({"x": cuda.to_device(host.astype(np.float64))}, {"out": out}, "x: dtype float64"),
            ({"x": cuda.to_device(host.ravel())}, {"out": out}, "is not 2-D"),
            ({"x": x}, {"out": cuda.device_array((2, 9), np.float32)}, "out: shape (2, 9)"),
            ({"x": cuda.to_device(np.zeros((2, 16), np.float32))[:, ::2]}, {"out": out}, "not contiguous"),
            ({"x": host}, {"out": out}, "host NumPy array")]:
        with pytest.raises(ArgumentError, match=says.replace("(", r"\(").replace(")", r"\)")):
            bind(inputs, outputs)


def test_warp_and_block_reductions(rng):
    @cuda.jit
    def reduce_all(x, sums, maxes, warp_m, warp_d, block_m, block_d):
        sm_m = cuda.shared.array(64, np.float32)
        sm_d = cuda.shared.array(64, np.float32)
        t = cuda.threadIdx.x
        v = x[t]
        sums[t] = warp_sum(v)
        maxes[t] = warp_max(v)
        warp_m[t], warp_d[t] = warp_md(v, np.float32(1))  # each element is a partial: m = x, d = 1
        block_m[t], block_d[t] = block_md(v, np.float32(1), sm_m, sm_d)

    x = (rng.standard_normal(64) * 5).astype(np.float32)
    outs = [cuda.device_array(64, np.float32) for _ in range(6)]
    reduce_all[1, 64](cuda.to_device(x), *outs)
    sums, maxes, wm, wd, bm, bd = (o.copy_to_host() for o in outs)
    for w in (slice(0, 32), slice(32, 64)):
        # A sum of mixed signs can cancel to near zero, where a relative tolerance means nothing: the bound
        # is float32's rounding error of a 5-level tree, relative to the sum of magnitudes.
        bound = 5 * np.finfo(np.float32).eps * np.abs(x[w]).astype(np.float64).sum()
        assert np.abs(sums[w] - x[w].astype(np.float64).sum()).max() <= bound and (maxes[w] == x[w].max()).all()
        assert (wm[w] == x[w].max()).all() and np.allclose(wd[w], np.exp(x[w] - x[w].max()).sum(), rtol=1e-5)
    assert (bm == x.max()).all() and np.allclose(bd, np.exp(x - x.max()).sum(), rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [1000, 1024, 4096, 32768, 32769, 50257, 131072])
@pytest.mark.parametrize("variant", list(W.variants))
def test_on_the_gpu_at_real_widths(variant, cols):
    # the simulator does not type-check: here every kernel is compiled and run at the widths that matter
    size = W.size(rows=67, cols=cols)
    if W.variant(variant).why_not(size) is not None:
        pytest.skip(W.variant(variant).why_not(size))
    result = check_variant(W, W.variant(variant), size, seed=cols)
    assert result.ok, result.explain()


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [32769, 50257])
def test_split_on_the_gpu_at_large_magnitudes_and_many_rows_per_group(cols, rng):
    # rows near +-6400 (x * 64), and more rows than the persistent grid has groups: every group loops
    shape = sp.split_shape(cols)
    rows = 3 * sp.split_groups(shape, 10**6) + 1
    launch, inputs, out = _split_run(rows, cols, shape, rng, scale=64.0)
    launch()
    launch()
    cuda.synchronize()
    assert launch.timed_out_at() is None
    got = out["out"].copy_to_host()
    for r0 in (0, rows // 2, rows - 4):
        window = slice(r0, r0 + 4)
        _, bad = compare("out", got[window], W.reference({"x": inputs["x"][window]})["out"], W.tolerance)
        assert bad is None, (r0, bad)


def test_every_variant_runs_through_the_ncu_child():
    from kernels_lab.instrument.ncu import _child
    assert _child(["softmax", "rows=2,cols=5", *W.variants]) == 0


# -- split: a row across k cooperating blocks (kernels_lab/topics/softmax/split.py) ------------------
# On the simulator the blocks of a split launch run side by side (sim_coresident.py): the waits are real.

def _split_run(rows, cols, shape, rng, scale=1.0, limit_ns=sp.TIMEOUT_NS):
    size = W.size(rows=rows, cols=cols)
    inputs = W.make_inputs(size, rng)
    inputs["x"] *= np.float32(scale)
    out = poisoned(W.output_specs(size))
    launch = sp.bind_split(to_device(inputs), out, shape=shape, limit_ns=limit_ns)
    return launch, inputs, out


@pytest.mark.skipif(ON_GPU, reason="simulator sizes; the GPU test below runs the real widths")
@pytest.mark.parametrize("what,rows,cols,slices,scale", [
    ("3 slices, odd width (rows straddle 16-byte vectors), one group of 3 blocks loops over 5 rows", 5, 301, 3, 1.0),
    ("2 slices, 2 groups: 5 rows in 3 and 2 iterations (both slots per group)", 5, 1032, 2, 1.0),
    ("4 slices, odd width, rows near +-6400: one element of a row ~1, the rest underflow", 3, 257, 4, 64.0),
    ("2 slices, the last one shorter than the others", 3, 67, 2, 1.0),
    ("2 slices, one chunk a thread, rows of 31 elements: most vectors shared with a neighbour row", 7, 31, 2, 1.0),
])
def test_split_matches_float64_with_real_waits(what, rows, cols, slices, scale, rng):
    shape = sp.split_shape(cols, slices=slices)
    launch, inputs, out = _split_run(rows, cols, shape, rng, scale)
    assert launch.grid == shape.slices * min(rows, sp.resident_blocks(shape) // slices)
    for k in range(2):  # a second launch: the flags go on counting from where the first left them
        with tracing() if k else nullcontext() as trace:  # the second launch's traffic is held to the plan
            launch()
        _, bad = compare("out", out["out"].copy_to_host(), W.reference(inputs)["out"], W.tolerance)
        assert bad is None, bad
    x_bytes = 4 * rows * cols
    traffic, plan = per_array(trace), sp.plan_split_for(W.size(rows=rows, cols=cols), shape).launches[0]
    (traced,) = trace.launches
    assert traced.kernel == plan.kernel and traced.grid[0] == plan.grid
    # x once, out once; the exchange's writes exactly; its reads at least the plan's (a wait may poll again)
    assert traced.bytes_written == plan.bytes_written and plan.bytes_read <= traced.bytes_read, traffic
    assert (traffic["x"].bytes_read, traffic["x"].bytes_written, traffic["out"].bytes_written) == (x_bytes, 0, x_bytes)


def test_split_layouts_by_width():
    # slices of SLICE_FLOATS (4096 on a GPU); past WIDE_SLICES slices, blocks twice as large
    f, t = sp.SLICE_FLOATS, sp.SLICE_THREADS
    shapes = [sp.split_shape(c) for c in (4 * f, 4 * f + 1, 2 * sp.WIDE_SLICES * f)]
    assert [(s.slices, s.threads, s.chunks) for s in shapes] == [(4, t, 8), (5, t, 8), (sp.WIDE_SLICES, 2 * t, 8)]
    # an odd width: its rows straddle 16-byte boundaries, so a row touches one vector more than f / 4 per slice
    assert shapes[0].slice_vectors(4 * f) == f // 4 and shapes[1].slice_vectors(4 * f + 1) * 5 >= f + 2
    widest = sp.MAX_SLICES * sm.FUSED_MAX_COLS
    assert sp.split_shape(widest) is not None and sp.split_shape(widest + 4) is None
    assert "`online`" in sp.split_refusal(widest + 4)


@pytest.mark.skipif(ON_GPU, reason="the simulator's side-by-side limit")
def test_split_refuses_a_row_whose_blocks_cannot_all_be_resident():
    from kernels_lab.sim_coresident import RESIDENT_BLOCKS
    cols = (RESIDENT_BLOCKS + 1) * sp.SLICE_FLOATS
    why = W.variant("split").why_not(W.size(rows=2, cols=cols))
    assert why is not None and f"needs {RESIDENT_BLOCKS + 1} blocks" in why and "`online`" in why
    x = cuda.to_device(np.ones((1, cols), np.float32))
    with pytest.raises(ArgumentError, match="resident at once"):
        W.variant("split").bind({"x": x}, {"out": cuda.device_array_like(x)})


def test_a_split_wait_that_never_ends_is_an_error_not_a_hang(rng):
    # block 1 of the row believes it has done 5 rows more than block 0: it waits for a flag block 0
    # will not raise in this launch, and gives up after its time limit
    shape = sp.split_shape(64, slices=2)
    launch, _, _ = _split_run(1, 64, shape, rng, limit_ns=200_000_000)
    launch.flags.copy_to_device(np.array([0, 5], np.int32))
    with pytest.raises(sp.ExchangeTimeout, match="row 0 .*were all 2 blocks resident"):
        launch()
        cuda.synchronize()
        launch()  # on a GPU the timeout is seen at the next call


# -- the exercise ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grades():
    from kernels_lab.grading.exercises import get_exercise  # here: the grader failing to import fails these tests only
    from kernels_lab.grading.grade import grade
    names = ("softmax_no_max_subtraction", "softmax_two_pass_global")  # the correct one: test_workloads
    ex = get_exercise("fused_softmax")

    def one(name):
        return grade(ex, submission(name), name, compile_gate=False, timeout_s=120)
    with ThreadPoolExecutor(len(names)) as pool:  # each grade waits on its own child process
        return dict(zip(names, pool.map(one, names)))


def _test(g, name):
    return next(t for t in g.tests if t.name == name)


def test_no_max_subtraction_overflows_and_loses_correctness(grades):
    g = grades["softmax_no_max_subtraction"]
    assert _test(g, "correct (public)").score == 0 and _test(g, "correct (hidden)").score == 0
    assert "got nan" in _test(g, "correct (public)").output and g.score < g.max_score / 2
    assert "never written" not in g.summary  # its NaNs are its own (inf / inf), not the untouched poison


def test_reading_x_three_times_loses_the_traffic_budget_only(grades):
    g = grades["softmax_two_pass_global"]
    assert all(_test(g, n).status == "passed" for n in ("correct (public)", "correct (hidden)", "launch budget"))
    assert _test(g, "traffic budget").score == 0 and "global traffic" in _test(g, "traffic budget").output


# -- the real compiler ------------------------------------------------------------------------------
