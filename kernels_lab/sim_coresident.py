"""On the simulator, kernels whose blocks wait for each other: their blocks run side by side.

numba's simulator runs a grid one block after another, so a block that waits for a later block
of the same launch waits forever: one block is resident at a time. A GPU kernel that exchanges
data between blocks (softmax_split: the blocks of a row swap their partial max and sum through
global memory) is only correct because all of its blocks are resident at once, which its
launcher guarantees by sizing the grid. Here such a kernel is marked (`mark(kernel)`) and its
launches start every block at once, each in its own thread, with shared memory of its own
(numba keys a launch's shared arrays by source line only: fine one block at a time, aliased
side by side). Every other kernel runs as before.

The kernel code is the same on both back-ends; only the simulator's block scheduler changes.
Fences stay no-ops (the simulator's memory is one coherent NumPy buffer), so what this checks
is the protocol's logic (who waits for what, which slot holds which row), not its memory
ordering: that is the GPU's job (tests/test_softmax.py runs it there at real widths), or the
weak-memory mode's (sim_weak.py: it tells side-by-side blocks apart by blockIdx).

numba-cuda 0.30 internals touched here and nowhere else: kernel.BlockManager (its run() is
called once per block inside FakeCUDAKernel.__call__); the shared arrays go through runtime.py's
locked lookup, whose key this widens.
"""

from __future__ import annotations

import threading

RESIDENT_BLOCKS = 4   # the most blocks a marked launch runs side by side (Python threads: keep it small)
_MARK = "kernels_lab_coresident"


def mark(kernel) -> None:
    """Run this (simulated) kernel's blocks side by side from now on."""
    install()
    setattr(kernel.py_func, _MARK, True)


def is_marked(kernel) -> bool:
    """Was this kernel marked (its blocks run side by side)?"""
    return _marked(getattr(kernel, "py_func", None))


def _marked(f) -> bool:
    return getattr(f, _MARK, False)


def _cluster_of(f) -> int:
    from .clusters import cluster_of
    return cluster_of(f)


def install() -> None:
    """Patch the simulator's block manager and shared arrays (idempotent; simulator only)."""
    from numba.cuda.simulator import kernel, kernelapi
    if getattr(kernel.BlockManager, _MARK, False):
        return
    plain = kernel.BlockManager

    class BlockManager(plain):
        """Runs a marked kernel's block in a thread; the grid's last block waits for all of them."""
        _running: list = []  # (thread, errors) of the launch in progress: one simulated launch at a time

        def run(self, grid_point, *args):
            if not _marked(self._f):
                return plain.run(self, grid_point, *args)
            errors: list[BaseException] = []

            def body():
                try:
                    plain.run(self, grid_point, *args)
                except BaseException as e:  # noqa: BLE001  (re-raised on the launching thread)
                    errors.append(e)
            t = threading.Thread(target=body, daemon=True, name=f"block {tuple(grid_point)}")
            t.start()
            BlockManager._running.append((t, errors))
            cluster = _cluster_of(self._f)  # a cluster launch (clusters.py): one cluster at a time
            if tuple(grid_point) == tuple(d - 1 for d in self._grid_dim) or \
                    cluster and (grid_point[0] + 1) % cluster == 0:  # the last block (of a cluster): join them all
                running, BlockManager._running = BlockManager._running, []
                for thread, _ in running:
                    thread.join()
                found = [e for _, errs in running for e in errs]
                if found:  # the cause, not a block that stopped because of it (clusters.ClusterAborted)
                    raise next((e for e in found if not getattr(e, "consequence", False)), found[0])

    BlockManager.__name__ = "BlockManager"
    setattr(BlockManager, _MARK, True)
    kernel.BlockManager = BlockManager

    # shared arrays: runtime.py's locked lookup, keyed for a marked kernel by its block too (numba keys
    # them by source line only: fine one block at a time, aliased side by side)
    locked = kernelapi.FakeCUDAShared.array
    if not getattr(locked, "kernels_lab_locked", False):
        raise RuntimeError("sim_coresident needs runtime.py's locked shared arrays (the simulator back-end)")
    line_key = locked.key

    def key(caller):
        t = threading.current_thread()
        manager = getattr(t, "_manager", None)
        return (caller, tuple(t.blockIdx)) if manager is not None and _marked(manager._f) else line_key(caller)

    locked.key = key
