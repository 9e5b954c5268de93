"""Lesson 07's exercise: the megakernel's dependency protocol, written by the student, and its check.

    signal(counters, layer)                    thread 0 of a block, after a block barrier: one more tile of
                                               `layer` is done (its stores must be visible before the count)
    wait(counters, layer, tiles, spin_limit)   thread 0, before its block reads layer + 1's input: True once
                                               counters[layer] >= tiles; False after at most spin_limit + 1 polls

check_protocol(signal, wait) runs the megakernel (decode_kernels) with them:
  1. bounded (simulator): a wait for 2 tiles when 1 is counted, and no more ever will be, returns False. A probe
     kernel of one thread runs in a thread of its own; if it has not returned after a few seconds the count is
     completed, so that it can, and the wait is reported unbounded;
  2. right: the back-end's own table, against float64, no wait given up;
  3. every tile counted (simulator): a table in which layer 1 runs before layer 0's last tile (block 0: layer 0
     but its last tile; block 1: layer 1; block 2: layer 0's last tile). Blocks run one after another there,
     so a wait that counts every tile gives up (the error the host reports) and a wait for fewer lets layer 1
     read a row of x_1 that nobody has written yet (a signal that adds more than 1 shows here too).
What it cannot check: memory ordering. The simulator's memory is one coherent buffer, so a plain load in place
of the acquire, or a count without the release (or a fence before it), passes here; on a GPU the first may be
hoisted out of the loop or read a stale x_l, the second may publish the count before the stores. On a GPU only
check 2 runs: an unbounded wait that never sees its count would hang the GPU, so check on the simulator first.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np

from ..arrays import poisoned, to_device
from ..checks import compare
from ..runtime import ON_SIMULATOR, cuda, host_view
from . import decode, decode_kernels as dk

PROBE_SECONDS = 3.0
SIZE = dict(hidden=11, layers=2, batch=2)  # 11 rows: several tiles a layer on the simulator


@lru_cache(maxsize=None)
def _probe(wait):
    def probe_wait(counters, result, spin_limit):
        if cuda.threadIdx.x == 0:
            result[0] = 1 if wait(counters, 0, 2, spin_limit) else 0
    return cuda.jit(probe_wait)


def _bounded(wait) -> str | None:
    """None when a wait for a count that never comes gives up (simulator), else what is wrong."""
    counters = cuda.mapped_array(1, np.int32)
    host_view(counters)[0] = 1  # one tile of two counted
    result = cuda.to_device(np.full(1, -1, np.int32))
    probe = threading.Thread(target=lambda: _probe(wait)[1, 1](counters, result, np.int64(3)), daemon=True)
    probe.start()
    probe.join(PROBE_SECONDS)
    if probe.is_alive():
        host_view(counters)[0] = 2  # let it end (a wait that polls memory sees this)
        probe.join(PROBE_SECONDS)
        return (f"wait(counters, 0, 2, spin_limit=3) with 1 of 2 tiles counted, and no more to come, had not "
                f"returned after {PROBE_SECONDS:g} s: it must give up (return False) after at most spin_limit + 1 polls")
    got = int(result.copy_to_host()[0])
    if got != 0:
        return (f"wait(counters, 0, 2, spin_limit=3) returned {'True' if got == 1 else got} with 1 of 2 tiles "
                f"counted: it may return True only once counters[layer] >= tiles")
    return None


def _late_tile_table(tiles: int) -> np.ndarray:
    """Block 0: layer 0 but its last tile; block 1: layer 1; block 2: layer 0's last tile."""
    rows = [[(dk.OP_TILE, 0, t) for t in range(tiles - 1)], [(dk.OP_TILE, 1, t) for t in range(tiles)],
            [(dk.OP_TILE, 0, tiles - 1)]]
    table = np.full((3, tiles + 1, 3), dk.OP_END, np.int32)
    for blk, row in enumerate(rows):
        table[blk, :len(row)] = row
    return table


def _run(signal, wait, table: np.ndarray | None, seed: int) -> tuple[decode.MegakernelLaunch, np.ndarray, np.ndarray]:
    w = decode.WORKLOAD
    size = w.size(**SIZE)
    inputs = w.make_inputs(size, np.random.default_rng(seed))
    out = poisoned(w.output_specs(size))
    launch = decode.bind_megakernel_with(to_device(inputs), out, table=table, spin_limit=50,
                                         protocol=(signal, wait))
    launch()
    cuda.synchronize()
    return launch, out["out"].copy_to_host(), w.reference(inputs)["out"]


def check_protocol(signal: Any, wait: Any) -> str:
    """Lesson 07's check: raises AssertionError with the feedback unless every check it can make here passes."""
    if signal is None or wait is None:
        raise AssertionError("define signal(counters, layer) and wait(counters, layer, tiles, spin_limit) as "
                             "@cuda.jit(device=True) functions")
    said = []
    if ON_SIMULATOR:
        if (problem := _bounded(wait)) is not None:
            raise AssertionError(problem)
        said.append("bounded: a wait for a count that never comes gives up")
    launch, got, want = _run(signal, wait, None, seed=71)
    if (layer := launch.timed_out_waiting_for()) is not None:
        raise AssertionError(f"with the megakernel's own table a wait for layer {layer} gave up: does signal add 1 "
                             f"to counters[layer] for every tile, and does wait compare counters[layer] with tiles?")
    _, bad = compare("out", got, want, decode.WORKLOAD.tolerance)
    if bad is not None:
        raise AssertionError(f"wrong output with the megakernel's own table ({bad.bad} elements, first out"
                             f"{list(bad.index)}: expected {bad.expected:.6g}, got {bad.got:.6g})")
    said.append("right: the output matches float64")
    if ON_SIMULATOR:
        tiles = dk.geometry(SIZE["hidden"], SIZE["batch"]).tiles
        launch, got, want = _run(signal, wait, _late_tile_table(tiles), seed=72)
        if launch.timed_out_waiting_for() is None:
            raise AssertionError(f"layer 1 ran before layer 0's last tile was counted (block 1 waited for layer 0 "
                                 f"while block 2, which runs after it here, still had a tile of it): wait must "
                                 f"return True only when all {tiles} tiles of the layer are counted, and signal "
                                 f"must add exactly 1 per tile")
        said.append("every tile counted: a wait before the last tile gives up")
        said.append("not checked here: memory ordering (the simulator's memory is coherent); on a GPU the poll "
                    "must be an acquire load and the count a release (or come after a fence)")
    else:
        said.append("not checked on a GPU: boundedness and the every-tile count (the simulator checks them), "
                    "memory ordering (read your PTX for ld.acquire and red.release)")
    return "protocol: " + "; ".join(said)
