"""Thread-block clusters and distributed shared memory (DSMEM) from numba, which has neither.

A cluster is k blocks (k <= 8 portable, 16 with an opt-in) that the GPU schedules at once on one GPC
(compute capability >= 9.0): they can read and write each other's shared memory and wait at one barrier.
Device side, inline PTX as numba intrinsics (the simulator's versions below run the same kernels):

  cluster_rank()                 this block's rank in its cluster, 0 .. k-1        (%cluster_ctarank)
  cluster_size()                 k, the blocks of the cluster                        (%cluster_nctarank)
  cluster_index()                which cluster of the grid this block is in          (%clusterid.x)
  dsmem_load(a, i, rank)         a[i] of block `rank`'s copy of the shared array a   (mapa + ld.shared::cluster)
  dsmem_store(a, i, rank, v)     a[i] = v in block `rank`'s copy                     (mapa + st.shared::cluster)
  cluster_arrive()               this thread has arrived; its writes (DSMEM too) are released
                                 (barrier.cluster.arrive.release)
  cluster_wait()                 wait until every thread of the cluster has arrived; what they wrote
                                 before arriving is visible (barrier.cluster.wait.acquire)
  cluster_sync()                 arrive, then wait

Every thread of the cluster must arrive (a barrier of all k x block threads, not of a block), and a block
must not touch another's shared memory before that block has started or after it has left: a kernel waits at
the barrier once before its first DSMEM access and once after its last (the CUDA guide's cluster.sync()).
The arrays are float32 or int32 shared arrays, 1-D, as numba declares them (cuda.shared.array).

Host side: cluster_launcher(kernel, grid, block, cluster, args) binds a launch once, as launch_paths does
(numba compiles and flattens the arguments once; cuLaunchKernelEx with the cluster-dimension attribute, and
the function attributes: dynamic shared memory past 48 KB, clusters past 8 blocks). `grid` counts blocks, a
multiple of `cluster`; 1-D grids and clusters only. Below compute capability 9.0 it refuses, naming the need.

On the simulator a cluster's blocks run side by side (sim_coresident, one cluster after another), DSMEM is the
other block's own shared array and the barrier a real barrier of the cluster's threads, bounded in time.

numba-cuda 0.30 internals touched here and nowhere else: the simulator's kernel._kernel_context (the fake
module of the launch in progress) and its FakeCUDAShared._allocations (keyed by sim_coresident per block),
BlockThread (.blockIdx, ._manager._f, .abort); on a GPU, what launch_paths.PreboundLaunch touches plus its
_config (CUlaunchConfig) and kernel handle. tests/test_clusters.py fails loudly if they move.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable

from .arrays import ArgumentError
from .backend import BACKEND
from .runtime import BackendError

MIN_CC = (9, 0)          # clusters and DSMEM: Hopper and later
PORTABLE_CLUSTER = 8     # the most blocks per cluster every cc 9.x GPU runs
MAX_CLUSTER = 16         # with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (H100/H200)
_ATTR = "kernels_lab_cluster"  # the cluster size a simulated kernel is launched with (on its py_func)


class ClusterError(RuntimeError):
    """A cluster launch or a cluster operation that cannot run as written."""


class ClusterAborted(ClusterError):
    """The simulator's block that stopped waiting because another block of its cluster failed: a consequence,
    never the error to report (sim_coresident raises the other block's)."""

    consequence = True


def cluster_refusal(cc: tuple[int, int] | None = None) -> str | None:
    """Why this machine cannot run thread-block clusters, or None. cc: the compute capability to judge
    (by default the device's; the simulator and the PTX back-end run them)."""
    if cc is None:
        if not BACKEND.on_device:
            return None
        cc = tuple(BACKEND.facts().compute_capability)
    if tuple(cc) < MIN_CC:
        return (f"thread-block clusters and distributed shared memory need compute capability >= "
                f"{MIN_CC[0]}.{MIN_CC[1]} (Hopper); this GPU is {cc[0]}.{cc[1]}")
    return None


def _check_shape(grid: int, block: int, cluster: int) -> None:
    for name, v in (("grid", grid), ("block", block), ("cluster", cluster)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ClusterError(f"a cluster launch takes a 1-D {name} as a positive int, got {v!r}")
    if cluster > MAX_CLUSTER:
        raise ClusterError(f"a cluster of {cluster} blocks: at most {MAX_CLUSTER} (past {PORTABLE_CLUSTER} "
                           f"only with the non-portable opt-in, which this launcher sets)")
    if grid % cluster:
        raise ClusterError(f"a grid of {grid} blocks is not a whole number of clusters of {cluster}")


def cluster_launcher(kernel, grid: int, block: int, cluster: int, args: tuple, stream: Any = 0, *,
                     dynamic_shared: int = 0) -> Callable[..., None]:
    """kernel launched as grid // cluster clusters of `cluster` blocks of `block` threads, bound once.
    dynamic_shared: bytes of dynamic shared memory per block (cuda.shared.array(0, ...)), past 48 KB too."""
    _check_shape(grid, block, cluster)
    if (why := cluster_refusal()) is not None:
        raise ClusterError(why)
    if BACKEND.python_threads:
        return _simulated_launch(kernel, grid, block, cluster, args, dynamic_shared)
    if not BACKEND.can_launch:
        raise BackendError(f"{BACKEND.where} runs no kernels (KERNELS_LAB_BACKEND=ptx compiles them only)")
    return _gpu_launch(kernel, grid, block, cluster, args, stream, dynamic_shared)


def _gpu_launch(kernel, grid, block, cluster, args, stream, dynamic_shared):
    from cuda.bindings import driver

    from .launch_paths import LaunchFailed, PreboundLaunch
    launch = PreboundLaunch(kernel, grid, block, args, stream)
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
    config = launch._config
    config.attrs = [config.attrs[k] for k in range(config.numAttrs)] + [attr]
    config.numAttrs += 1
    config.sharedMemBytes = dynamic_shared
    handle, device = driver.CUkernel(int(launch.kernel.handle)), driver.CUdevice(_device_id())
    F = driver.CUfunction_attribute
    # the opt-in whenever there is dynamic memory: 48 KB of it plus the static arrays is already past the default
    for wanted, attribute, value in ((dynamic_shared > 0, F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      dynamic_shared),
                                     (cluster > PORTABLE_CLUSTER, F.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                      1)):
        if wanted:
            err, = driver.cuKernelSetAttribute(attribute, value, handle, device)
            if err != driver.CUresult.CUDA_SUCCESS:
                raise LaunchFailed(f"cuKernelSetAttribute({attribute.name}, {value}) for {launch.name}: {err!r}")
    launch.cluster, launch.dynamic_shared = cluster, dynamic_shared
    return launch


def _device_id() -> int:
    from .runtime import cuda
    return int(cuda.get_current_device().id)


def max_active_clusters(launch) -> int | None:
    """How many clusters of a bound launch the device holds at once (cuOccupancyMaxActiveClusters);
    0: this cluster shape cannot run at all (too many blocks, too much shared memory or registers).
    None on the simulator (one cluster at a time, whatever its size)."""
    if not BACKEND.on_device:
        return None
    from cuda.bindings import driver
    err, n = driver.cuOccupancyMaxActiveClusters(launch._function, launch._config)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise ClusterError(f"cuOccupancyMaxActiveClusters({launch.name}): {err!r}")
    return int(n)


def resident_launcher(kernel, rows: int, slices: int, block: int, args: tuple, stream: Any = 0,
                      clusters: int | None = None, dynamic_shared: int = 0) -> Callable[..., None]:
    """A persistent grid: as many clusters of `slices` blocks as the GPU holds at once (at most one a row), each
    striding over the rows; `clusters` another count (the simulator, one cluster at a time, takes one a row)."""
    def launcher(count: int):
        return cluster_launcher(kernel, count * slices, block, slices, args, stream, dynamic_shared=dynamic_shared)
    if clusters is None:
        resident = max_active_clusters(launcher(1))
        if resident == 0:
            raise ArgumentError(f"clusters of {slices} blocks of {block} threads with {dynamic_shared} bytes of "
                                f"dynamic shared memory a block cannot run on this GPU")
        clusters = resident or rows
    return launcher(min(rows, clusters))


# -- the simulator: clusters of blocks side by side ------------------------------------------------------

BARRIER_LIMIT_S = 120.0   # a simulated cluster barrier with no thread arriving for this long names the hang
_POLL_S = 0.25            # how often a waiting thread looks for an abort of its block


def _simulated_launch(kernel, grid, block, cluster, args, dynamic_shared):
    from .sim_coresident import mark
    mark(kernel)
    configured = kernel[grid, block, 0, dynamic_shared]

    def launch(target: Any = None) -> None:
        setattr(kernel.py_func, _ATTR, cluster)  # one simulated launch at a time: read by its blocks
        try:
            configured(*args)
        finally:
            setattr(kernel.py_func, _ATTR, 0)  # a plain launch of the same kernel is no cluster launch
    return launch


def cluster_of(f) -> int:
    """The cluster size a simulated kernel (its py_func) is launched with; 0 when not a cluster launch.
    sim_coresident runs such a launch one cluster at a time."""
    return getattr(f, _ATTR, 0)


class _Barrier:
    """barrier.cluster's arrive / wait for `count` threads: a thread's wait returns once every thread has
    arrived in the phase it arrived in."""

    def __init__(self, count: int):
        self.count, self.arrived, self.phase = count, 0, 0
        self.progress = time.monotonic()  # when a thread last arrived (slow Python threads are no hang)
        self.cond = threading.Condition()
        self.members: set = set()  # the threads that have arrived: one that raised marks its block's .abort


def _me():
    t = threading.current_thread()
    manager = getattr(t, "_manager", None)
    if manager is None or not cluster_of(manager._f):
        raise ClusterError("a cluster operation outside a cluster launch (launch the kernel with "
                           "kernels_lab.clusters.cluster_launcher)")
    return t, cluster_of(manager._f)


def _rank() -> int:
    t, k = _me()
    return int(t.blockIdx.x) % k


def _size() -> int:
    return _me()[1]


def _index() -> int:
    t, k = _me()
    return int(t.blockIdx.x) // k


def _barrier(t, k: int) -> _Barrier:
    from numba.cuda.simulator import kernel as sim_kernel
    module = sim_kernel._kernel_context
    with _LOCK:
        barriers = module.__dict__.setdefault("_kl_cluster_barriers", {})
        key = int(t.blockIdx.x) // k
        if key not in barriers:
            dim = t._manager._block_dim
            barriers[key] = _Barrier(k * int(dim[0]) * int(dim[1]) * int(dim[2]))
        return barriers[key]


_LOCK = threading.Lock()


def _arrive() -> None:
    t, k = _me()
    if getattr(t, "_kl_cluster_phase", None) is not None:
        raise ClusterError(f"thread {tuple(t.threadIdx)} of block {tuple(t.blockIdx)} arrives at the cluster "
                           f"barrier twice without waiting in between (undefined in PTX)")
    _stop_if_aborted(t)
    b = _barrier(t, k)
    with b.cond:
        t._kl_cluster_phase = b.phase
        b.members.add(t)
        b.arrived += 1
        b.progress = time.monotonic()
        if b.arrived == b.count:
            b.arrived, b.phase = 0, b.phase + 1
            b.cond.notify_all()


def _wait() -> None:
    t, k = _me()
    phase = getattr(t, "_kl_cluster_phase", None)
    if phase is None:
        raise ClusterError(f"thread {tuple(t.threadIdx)} of block {tuple(t.blockIdx)} waits at the cluster "
                           f"barrier without having arrived (call cluster_arrive first)")
    b, mine = _barrier(t, k), tuple(t.blockIdx)
    with b.cond:
        while b.phase == phase:
            _stop_if_aborted(t)
            # another block's thread raised (its error is set at once, its block's .abort once its block manager
            # has seen it). A failure in this block is this block manager's to report (it then sets our .abort):
            # a consequence raised here first could be the error it reports instead
            failed = {tuple(m.blockIdx) for m in b.members if m.exception or m.abort}
            if failed and mine not in failed:
                raise ClusterAborted(f"block {mine} stopped waiting at the cluster barrier: another "
                                     f"block of its cluster failed")
            if time.monotonic() - b.progress > BARRIER_LIMIT_S:
                raise ClusterError(f"block {mine} waited at the cluster barrier {BARRIER_LIMIT_S:.0f} s "
                                   f"after the last arrival: {b.count - b.arrived} of the cluster's {b.count} "
                                   f"threads never "
                                   f"arrived (every thread of every block of the cluster must; on a GPU: a hang)")
            b.cond.wait(_POLL_S)
    t._kl_cluster_phase = None


def _stop_if_aborted(t) -> None:
    """A thread whose block has failed takes no further part in a cluster: a thread left running by a failed
    launch (numba does not join them) would otherwise arrive at the next launch's barrier or read its blocks'
    shared memory."""
    if t.abort:
        raise ClusterAborted(f"block {tuple(t.blockIdx)}: its block failed; this thread stops at its next cluster "
                             f"operation")


def _sync() -> None:
    _arrive()
    _wait()


def _peer(a, rank):
    """Block `rank`'s copy of the calling block's shared array `a` (sim_coresident keys shared arrays by
    (source line, block))."""
    from numba.cuda.simulator import kernel as sim_kernel
    t, k = _me()
    _stop_if_aborted(t)
    rank = int(rank)
    if not 0 <= rank < k:
        raise ClusterError(f"DSMEM access to block rank {rank} of a cluster of {k} (undefined on a GPU)")
    allocations = sim_kernel._kernel_context._shared._allocations
    for key, arr in list(allocations.items()):
        if arr is a:
            line, block = key
            target = (int(block[0]) - int(block[0]) % k + rank,) + tuple(block[1:])
            peer = allocations.get((line, target))
            if peer is None:
                raise ClusterError(f"block rank {rank} has not declared that shared array yet (wait at the "
                                   f"cluster barrier once before the first DSMEM access: a block that has not "
                                   f"started has no shared memory to read)")
            return peer
    raise ClusterError("dsmem_load / dsmem_store take a shared array (cuda.shared.array) of the kernel")


_STAGGER_S = [0.0, False]  # staggered_loads' seconds per rank (0: loads at once), and reversed
STAGGERS_LOADS = BACKEND.python_threads  # staggered_loads delays only the simulator's DSMEM loads; a GPU's are not


@contextlib.contextmanager
def staggered_loads(seconds_per_rank: float, reverse: bool = False):
    """Simulator: while open, every DSMEM load of a block of rank r first sleeps r x seconds_per_rank (with
    `reverse`, (k - 1 - r) x seconds_per_rank in a cluster of k), so the later ranks read their peers long after
    the first has finished: a schedule a GPU may take, made certain. A kernel that lets a block overwrite (or
    leave) its shared memory with no cluster barrier after the reads then reads an overwritten value here: the
    pair of rank 0 in one order, of rank k - 1 in the other. One launch at a time."""
    _STAGGER_S[:] = [seconds_per_rank, reverse]
    try:
        yield
    finally:
        _STAGGER_S[:] = [0.0, False]


def _dsmem_load(a, i, rank):
    if _STAGGER_S[0]:
        r = _rank()
        time.sleep((_size() - 1 - r if _STAGGER_S[1] else r) * _STAGGER_S[0])
    return _peer(a, rank)[i]


def _dsmem_store(a, i, rank, v) -> None:
    _peer(a, rank)[i] = v


if BACKEND.python_threads:  # the simulator's: in Python
    cluster_rank, cluster_size, cluster_index = _rank, _size, _index
    cluster_arrive, cluster_wait, cluster_sync = _arrive, _wait, _sync
    dsmem_load, dsmem_store = _dsmem_load, _dsmem_store

else:
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.extending import intrinsic

    from .intrinsics import _inline_asm as _asm
    from .intrinsics import _instruction

    def _special_register(name: str):
        @intrinsic
        def read(typingctx):
            def codegen(context, builder, signature, args):
                return _asm(builder, ir.IntType(32), f"mov.u32 $0, {name};", "=r")
            return types.int32(), codegen
        return read

    cluster_rank = _special_register("%cluster_ctarank")
    cluster_size = _special_register("%cluster_nctarank")
    cluster_index = _special_register("%clusterid.x")

    # not .aligned: correct however the threads of a warp arrive (the kernels call it uniformly anyway)
    cluster_arrive = _instruction("barrier.cluster.arrive.release;")
    cluster_wait = _instruction("barrier.cluster.wait.acquire;")
    cluster_sync = _instruction("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;")

    _PTX_TYPES = {types.float32: ("f32", "f", ir.FloatType()), types.int32: ("s32", "r", ir.IntType(32))}

    def _check(op: str, a, i, rank):
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.dtype in _PTX_TYPES):
            raise TypeError(f"{op} needs a 1-D float32 or int32 shared array, got {a}")
        if not (isinstance(i, types.Integer) and isinstance(rank, types.Integer)):
            raise TypeError(f"{op} needs an integer index and block rank, got {i}, {rank}")

    # the element's generic address -> its shared-window address -> the same offset in block `rank`
    def _mapped(pointer: str, rank: str, access: str) -> str:
        return ("{\n\t.reg .u64 %kl_g;\n\t.reg .u32 %kl_s, %kl_r;\n\t"
                f"cvta.to.shared.u64 %kl_g, {pointer};\n\tcvt.u32.u64 %kl_s, %kl_g;\n\t"
                f"mapa.shared::cluster.u32 %kl_r, %kl_s, {rank};\n\t{access}\n\t}}")

    def _pointer_and_rank(context, builder, signature, args):
        a, i, rank = args[:3]
        data = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=a).data
        ptr = builder.ptrtoint(builder.gep(data, [i]), ir.IntType(64))
        return ptr, context.cast(builder, rank, signature.args[2], types.uint32)

    @intrinsic
    def dsmem_load(typingctx, a, i, rank):
        _check("dsmem_load", a, i, rank)
        ptx, reg, llty = _PTX_TYPES[a.dtype]

        def codegen(context, builder, signature, args):
            ptr, r = _pointer_and_rank(context, builder, signature, args)
            asm = _mapped("$1", "$2", f"ld.shared::cluster.{ptx} $0, [%kl_r];")
            return _asm(builder, llty, asm, f"={reg},l,r,~{{memory}}", (ptr, r))
        return a.dtype(a, i, rank), codegen

    @intrinsic
    def dsmem_store(typingctx, a, i, rank, v):
        _check("dsmem_store", a, i, rank)
        ptx, reg, llty = _PTX_TYPES[a.dtype]

        def codegen(context, builder, signature, args):
            ptr, r = _pointer_and_rank(context, builder, signature, args)
            val = context.cast(builder, args[3], signature.args[3], signature.args[0].dtype)
            asm = _mapped("$0", "$1", f"st.shared::cluster.{ptx} [%kl_r], $2;")
            _asm(builder, ir.VoidType(), asm, f"l,r,{reg},~{{memory}}", (ptr, r, val))
            return context.get_dummy_value()
        return types.void(a, i, rank, v), codegen
