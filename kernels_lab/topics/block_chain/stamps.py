"""Where a block_chain megakernel's time goes, tile by tile: thread 0 of every (layer, tile) stamps the GPU's
%globaltimer four times (kernels.py: STARTED, then WAITED after its producers' counts came, COMPUTED before
its release, RELEASED after it), so one pass splits into

    wait     WAITED - STARTED     its weights' loads issued, its three producers polled until they counted
    work     COMPUTED - WAITED    x_l's 3G inputs loaded (an L2 round trip), the FMAs, the block's stores
    release  RELEASED - COMPUTED  the release add (the fence before it waits for the stores to reach L2)

and a layer's `done` (the last of its tiles released, from the first stamp of the pass), and the hand-off: from
the last of a tile's three producers stamping COMPUTED (about to release) to the tile stamping WAITED (it has
seen all three counts), the protocol's own latency. The megakernel's
answer to "why is hidden 2048 slower than 1024 when it has twice the blocks to hide latency with" is in these
numbers, not in a guess (issue 34).

    python -m kernels_lab.topics.block_chain.stamps OUT.json [HIDDEN ...]     (a GPU: the simulator has no clock)

%globaltimer ticks in steps the GPU chooses (tens to hundreds of ns): one tile's phase is a few ticks, so the
record keeps means over every tile and pass, and one whole pass (the median one) for the figure.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ...arrays import poisoned, to_device
from ...checks import compare
from ...backend import BACKEND
from ...core import Size
from ...instrument.timing import time_steady
from ...runtime import cuda
from . import kernels as ck
from .workload import WORKLOAD as W, bind_megakernel_with

KIND = "tile_stamps"
PHASES = {"wait": (ck.STARTED, ck.WAITED), "work": (ck.WAITED, ck.COMPUTED), "release": (ck.COMPUTED, ck.RELEASED)}


def phases(stamps: np.ndarray) -> dict[str, np.ndarray]:
    """(passes, layers, tiles, STAMPS) ns -> each phase's length, (passes, layers, tiles) ns."""
    return {name: stamps[..., b] - stamps[..., a] for name, (a, b) in PHASES.items()}


def handoffs(stamps: np.ndarray) -> np.ndarray:
    """(passes, layers - 1, tiles) ns: each tile of layers 1.. from its last producer's COMPUTED to its WAITED."""
    computed = stamps[:, :-1, :, ck.COMPUTED]
    edge = np.iinfo(np.int64).min  # no tile beyond the edges
    pad = np.pad(computed, ((0, 0), (0, 0), (1, 1)), constant_values=edge)
    last = np.maximum(np.maximum(pad[..., :-2], pad[..., 1:-1]), pad[..., 2:])  # tiles t - 1, t, t + 1
    return stamps[:, 1:, :, ck.WAITED] - last


def summarise(stamps: np.ndarray) -> dict[str, Any]:
    """Means per layer over tiles and passes, each layer's done time (median over passes), the hand-off's
    median, the pass span, and the median pass itself, in us from that pass's first stamp."""
    start = stamps[..., ck.STARTED].min(axis=(1, 2))[:, None, None, None]
    rel = (stamps - start) / 1e3
    done = rel[..., ck.RELEASED].max(axis=2)  # (passes, layers)
    span = done.max(axis=1)
    median_pass = int(np.argsort(span)[len(span) // 2])
    return {
        "phases_us": {k: (v / 1e3).mean(axis=(0, 2)).round(4).tolist() for k, v in phases(stamps).items()},
        "done_us": np.median(done, axis=0).round(4).tolist(),
        "handoff_us": float(np.median(handoffs(stamps))) / 1e3 if stamps.shape[1] > 1 else None,
        "span_us": float(np.median(span)),
        "pass_us": rel[median_pass].round(4).tolist(),  # (layers, tiles, STAMPS)
    }


def measure(size: Size, marked: bool, passes: int = 200, rng: np.random.Generator | None = None) -> dict[str, Any]:
    """One line's record: its output checked against float64, its stamps over `passes` passes, and its us per
    pass with and without stamps (what the stamps cost)."""
    inputs = W.make_inputs(size, rng or np.random.default_rng(0))
    dev = to_device(inputs)
    ref = W.reference(inputs)
    launches = []
    for stamped in (False, True):
        outputs = poisoned(W.output_specs(size))
        launch = bind_megakernel_with(dev, outputs, marked=marked, stamped=stamped)
        launch()
        cuda.synchronize()
        launch.raise_if_timed_out()
        for name, want in ref.items():
            _, bad = compare(name, outputs[name].copy_to_host(), want, W.tolerance)
            if bad is not None:
                raise AssertionError(f"block_chain {'marked ' * marked}megakernel, {size}: {bad}")
        launches.append(launch)
    # passes back to back, the two interleaved: what the stamps cost (the simulator has no clock to time by)
    timed = [t.median_ms * 1e3 for t in time_steady(launches)] if BACKEND.can_time else [None, None]
    runs = []
    for _ in range(passes):
        launch()
        cuda.synchronize()
        runs.append(launch.stamps_ns())
    launch.raise_if_timed_out()
    return {"kind": KIND, "workload": W.name, "line": "megakernel_marked" if marked else "megakernel",
            "size": dict(size), "tiles": launch.tiles, "blocks": launch.blocks, "passes": passes,
            "us_per_pass": timed[0], "us_per_pass_stamped": timed[1], **summarise(np.stack(runs))}


def main(argv: list[str]) -> int:
    from ...profile import results
    out, hidden = argv[0], [int(h) for h in argv[1:]] or [1024, 2048]
    records = []
    for h in hidden:
        for marked in (False, True):
            rec = measure(W.size(hidden=h), marked)
            records.append(rec)
            print(f"hidden {h:5d} {rec['line']:<18} {rec['us_per_pass'] or 0:7.2f} us/pass "
                  f"(stamped {rec['us_per_pass_stamped'] or 0:7.2f}), span {rec['span_us']:6.2f} us; a layer "
                  f"{np.mean(np.diff(rec['done_us'])):.2f} us: hand-off {rec['handoff_us']:.2f}, work "
                  f"{np.mean(rec['phases_us']['work'][1:]):.2f}, release {np.mean(rec['phases_us']['release'][1:]):.2f}")
    results.dump(results.make_meta(command="python -m kernels_lab.topics.block_chain.stamps " + " ".join(argv)),
                 records, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
