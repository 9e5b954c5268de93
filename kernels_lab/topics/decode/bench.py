"""A decode step's chain of dense layers on one GPU in one run: every variant checked, then timed.

    PYTHONPATH=$PWD python -m kernels_lab.topics.decode.bench OUT_DIR [--budget-s 200]
    PYTHONPATH=$PWD python -m kernels_lab.topics.decode.bench OUT_DIR --layers 8 --batch 1   (issue 34 item 3:
        hidden 1024 / 2048 / 4096 and the hidden-4096 sweep, about 3 minutes on an H200)

For hidden in (1024, 2048, 4096), layers in (8, 16), batch in (1, 4, 16), the issue's targets first
(8 layers, batch 1), then the rest while the time budget lasts (what was left out is listed in the
results' meta and printed):
1. the copy ceiling (profile.ceiling: the better of driver memcpy and a 16-byte copy kernel);
2. every registered decode variant (and at batch 1 the megakernel's other shapes, VERSIONS; at hidden 4096
   the double-buffered megakernel's sweep, SWEEP) run once on fresh inputs into poisoned outputs and checked
   against float64; a wrong or failing one is reported and not timed;
3. anchors, when torch imports (torch is not a dependency of the project): the eager loop
   (F.linear + tanh-GELU per layer), that loop captured in a torch CUDA graph, and
   torch.compile(mode="reduce-overhead") of it (batch 1, 8 layers by default: each shape compiles anew, for
   tens of seconds), checked the same way;
4. two times per variant and anchor: steady state, PASSES passes back to back between two events
   (median over REPS, interleaved), and the latency of one pass with its launch (host clock from the
   call to the end of a synchronize, median); each kernel's residency read from the compiled kernel
   (occupancy.py: registers, blocks per SM, weight bytes in flight per SM); both megakernels' own
   %globaltimer timelines at hidden 1024 and 4096;
5. OUT_DIR/decode_bench.json (results v1: us_per_pass, latency_us, weight_bytes, floor_us = weight bytes /
   the copy ceiling, weights_in_l2: that floor does not bind), the figures of figures.py, and the tables:
   every variant, the hidden-4096 residency sweep, the targets.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable


import numpy as np

from kernels_lab.arrays import poisoned
from kernels_lab.checks import compare
from kernels_lab.core import Size, get_workload
from kernels_lab.topics.decode.figures import deficit_table, figures, table, targets
from kernels_lab.profile.ceiling import measure_copy_ceiling
from kernels_lab.profile.results import dump, make_meta
from kernels_lab.runtime import cuda, device_facts
from kernels_lab.topics.decode import occupancy, workload as decode

W = get_workload("decode")
HIDDEN, LAYERS, BATCH = (1024, 2048, 4096), (8, 16), (1, 4, 16)
PASSES, REPS, LATENCY_REPS = 20, 9, 25
# timed beside the registered megakernels at batch 1 (records carry "version"): other blocks-per-SM counts,
# and 128-thread blocks (half the rows per tile: twice the tiles per layer), 4 per SM
Mega = decode.Mega
VERSIONS = {**{f"megakernel_{k}sm": decode.megakernel_variant(f"megakernel_{k}sm", Mega(per_sm=k),
                                                              f"megakernel, {k} block(s) per SM")
               for k in (1, 4) if k != decode.MEGA_BLOCKS_PER_SM},
            "megakernel_t128": decode.megakernel_variant("megakernel_t128", Mega(per_sm=4, threads=128),
                                                         "megakernel, 4 blocks of 128 threads per SM"),
            "megakernel_marked_lb2": decode.megakernel_variant(
                "megakernel_marked_lb2", Mega(double_buffered=True, marked=True, min_blocks=2),
                "megakernel_marked, registers capped for 2 blocks per SM (launch bounds)")}
# and at hidden 4096 only (the deficit's sweep): the double-buffered megakernel's L2 look-ahead, blocks per
# SM, tile size (64 threads a row: two 64 KB tiles a block, one block an SM) and block size
SWEEP_HIDDEN = 4096
SWEEP = {**{f"megakernel_db_p{p}": decode.megakernel_variant(
                f"megakernel_db_p{p}", Mega(double_buffered=True, prefetch=p),
                f"megakernel_db, {p} tile(s) asked of L2 beyond its two") for p in (0, 2, 4) if p != decode.DB_PREFETCH},
         "megakernel_db_1sm": decode.megakernel_variant("megakernel_db_1sm", Mega(per_sm=1, double_buffered=True),
                                                        "megakernel_db, 1 block per SM"),
         "megakernel_db_rt64": decode.megakernel_variant(
             "megakernel_db_rt64", Mega(double_buffered=True, row_threads=64),
             "megakernel_db, 64 threads a row: two 4-row tiles (64 KB each) a block"),
         "megakernel_db_t128": decode.megakernel_variant("megakernel_db_t128",
                                                         Mega(per_sm=4, threads=128, double_buffered=True),
                                                         "megakernel_db, 4 blocks of 128 threads per SM")}
TIMELINE_SIZES = ((1024, 8, 1), (4096, 8, 1))  # a stamped run of each megakernel: when each layer waits and ends
TIMELINE_VARIANTS = {"megakernel": decode.EXERCISE_MEGA, "megakernel_db": decode.DB_MEGA,
                     "megakernel_marked": decode.MARKED_MEGA}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sizes_in_order(hidden, layers, batch) -> list[Size]:
    """The targets' sizes (8 layers, batch 1) first, then the rest: a trimmed run keeps the targets."""
    every = [W.size(hidden=h, layers=l, batch=b) for h in hidden for l in layers for b in batch]
    return sorted(every, key=lambda s: (s.layers != 8 or s.batch != 1,))  # stable: by hidden within each


# -- timing: steady state and one pass with its launch ----------------------------------------------------

class Clock:
    """Events and a synchronize for one framework (numba's or torch's: each times its own launches)."""

    def __init__(self, event: Callable[[], Any], synchronize: Callable[[], None]):
        self.event, self.synchronize = event, synchronize

    def steady(self, launchers: list[Callable[[], None]], passes: int, reps: int) -> list[list[float]]:
        """us per pass, PASSES back to back between two events, REPS times, the launchers interleaved."""
        start, end = self.event(), self.event()
        samples: list[list[float]] = [[] for _ in launchers]
        for _ in range(reps):
            for k, launch in enumerate(launchers):
                self.synchronize()
                start.record()
                for _ in range(passes):
                    launch()
                end.record()
                end.synchronize()
                samples[k].append(start.elapsed_time(end) * 1e3 / passes)
        return samples

    def latency(self, launch: Callable[[], None], reps: int) -> list[float]:
        """us from the call to the end of a synchronize: one pass with its launch."""
        out = []
        for _ in range(reps):
            self.synchronize()
            t0 = time.perf_counter()
            launch()
            self.synchronize()
            out.append((time.perf_counter() - t0) * 1e6)
        return out


class _NumbaEvent:
    def __init__(self):
        self.e = cuda.event()

    def record(self):
        self.e.record(0)

    def synchronize(self):
        self.e.synchronize()

    def elapsed_time(self, end: "_NumbaEvent") -> float:
        return self.e.elapsed_time(end.e)


NUMBA_CLOCK = Clock(_NumbaEvent, cuda.synchronize)


def stats(samples: list[float]) -> dict[str, float]:
    q1, med, q3 = np.percentile(np.asarray(samples), [25, 50, 75])
    return {"median": float(med), "q1": float(q1), "q3": float(q3)}


# -- one size -----------------------------------------------------------------------------------------------

class Inputs:
    """Weights for the largest layer count of one hidden size on the device (every layer count of that
    hidden uses its first layers; 1.3 GB for all three hidden sizes), x per size; the host copies for the
    float64 reference."""

    def __init__(self, hidden: int, layers: int, rng: np.random.Generator):
        host = W.make_inputs(W.size(hidden=hidden, layers=layers, batch=1), rng)
        self.host_W, self.host_bias = host["W"], host["bias"]
        self.W, self.bias = cuda.to_device(self.host_W), cuda.to_device(self.host_bias)

    def at(self, size: Size, rng: np.random.Generator) -> tuple[dict, dict]:
        x = rng.standard_normal((size.batch, size.hidden)).astype(np.float32)
        L = size.layers
        host = {"W": self.host_W[:L], "bias": self.host_bias[:L], "x": x}
        device = {"W": self.W[:L], "bias": self.bias[:L], "x": cuda.to_device(x)}
        return host, device


def check(got: np.ndarray, ref: np.ndarray) -> str | None:
    _, bad = compare("out", got, ref, W.tolerance)
    if bad is None:
        return None
    return (f"{bad.bad} bad ({bad.unwritten} unwritten), first out{list(bad.index)}: expected {bad.expected:.6g}, "
            f"got {bad.got:.6g}")


def record(size: Size, name: str, pattern: str, about: str, steady: list[float], latency: list[float],
           ceiling: float, launches: int, bytes_model: int | None, **extra) -> dict[str, Any]:
    weights = 4 * size.layers * size.hidden ** 2
    s, lat = stats(steady), stats(latency)
    return {"kind": "decode", "workload": "decode", "variant": name, "pattern": pattern, "about": about,
            "n": size.elements, "size": dict(size), "launches": launches, "bytes_model": bytes_model,
            "time_ms": s["median"] / 1e3, "time_ms_q1": s["q1"] / 1e3, "time_ms_q3": s["q3"] / 1e3,
            "GBs": weights / (s["median"] * 1e-6) / 1e9, "us_per_pass": s["median"],
            "latency_us": lat["median"], "latency_us_q1": lat["q1"], "latency_us_q3": lat["q3"],
            "weight_bytes": weights, "floor_us": weights / (ceiling * 1e9) * 1e6,
            "of_ceiling": weights / (s["median"] * 1e-6) / (ceiling * 1e9),
            "weights_in_l2": weights <= device_facts().l2_bytes, "correct": True, **extra}


def measure_size(size: Size, inputs: Inputs, ceiling: float, problems: list[str], compile_torch: bool,
                 rng: np.random.Generator) -> list[dict[str, Any]]:
    host, device = inputs.at(size, rng)
    ref = W.reference(host)["out"]
    passing, launchers = [], []
    versions = {**VERSIONS, **(SWEEP if size.hidden == SWEEP_HIDDEN else {})} if size.batch == 1 else {}
    for name, variant in {**W.variants, **versions}.items():
        if (why := variant.why_not(size)) is not None:
            problems.append(f"{size} {name}: not run: {why}")
            continue
        t0 = time.perf_counter()
        try:
            out = poisoned(W.output_specs(size))
            launch = variant.bind(device, out)
            launch()
            cuda.synchronize()
            if isinstance(launch, decode.MegakernelLaunch):
                launch.raise_if_timed_out()
            wrong = check(out["out"].copy_to_host(), ref)
        except Exception as e:  # noqa: BLE001  (one broken variant must not cost the others' numbers)
            traceback.print_exc()
            wrong = f"{type(e).__name__}: {e}"[:600]
        log(f"  {size} {name}: {'ok' if wrong is None else 'WRONG ' + wrong} ({time.perf_counter() - t0:.1f} s)")
        if wrong is None:
            passing.append((name, variant, out, launch))
            launchers.append(launch)
        else:
            problems.append(f"{size} {name}: {wrong}")
    records = []
    if launchers:
        steady = NUMBA_CLOCK.steady(launchers, PASSES, REPS)
        for (name, variant, out, launch), samples in zip(passing, steady):
            latency = NUMBA_CLOCK.latency(launch, LATENCY_REPS)
            again = check(out["out"].copy_to_host(), ref)  # still right after all the timed passes
            if again is not None:
                problems.append(f"{size} {name}: wrong after timing: {again}")
                continue
            plan = variant.plan(size)
            extra = {"blocks": plan.launches[0].grid} if plan.n_launches == 1 else {}
            if name in versions:
                extra["version"] = name.removeprefix("megakernel_")
            try:
                if (held := occupancy.of_variant(name, launch, size)) is not None:
                    extra["residency"] = held.record()
            except Exception as e:  # noqa: BLE001  (a missing residency must not cost the timing)
                problems.append(f"{size} {name}: residency: {type(e).__name__}: {e}"[:400])
            if name in TIMELINE_VARIANTS and (size.hidden, size.layers, size.batch) in TIMELINE_SIZES:
                extra["timeline"] = stamped_timeline(device, size, TIMELINE_VARIANTS[name])
            records.append(record(size, name, variant.pattern, variant.about, samples, latency, ceiling,
                                  plan.n_launches, plan.bytes_total, **extra))
    return records + torch_anchors(size, device, ref, ceiling, problems, compile_torch)


def stamped_timeline(device: dict, size: Size, mega: decode.Mega) -> list[dict[str, float]]:
    """One warm pass of a megakernel with its %globaltimer stamps on: per layer, start, first and last tile
    let past the wait, last tile counted (us)."""
    launch = decode.bind_megakernel_with(device, poisoned(W.output_specs(size)), stamped=True, mega=mega)
    launch()
    launch()  # the second pass: weights as warm as in the steady state
    cuda.synchronize()
    return launch.timeline()


# -- anchors ---------------------------------------------------------------------------------------------

def torch_anchors(size: Size, device: dict, ref: np.ndarray, ceiling: float, problems: list[str],
                  compile_torch: bool) -> list[dict[str, Any]]:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    torch.backends.cuda.matmul.allow_tf32 = False  # float32, as ours
    Wt, bt = torch.as_tensor(device["W"], device="cuda"), torch.as_tensor(device["bias"], device="cuda")
    x = torch.as_tensor(device["x"], device="cuda")
    L = size.layers

    def chain(x0):
        h = x0
        for l in range(L):
            h = F.gelu(F.linear(h, Wt[l], bt[l]), approximate="tanh")
        return h

    result: dict[str, Any] = {}

    def eager():
        result["torch_eager"] = chain(x)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain(x)  # warm up (cuBLAS picks its kernels) outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_out = chain(x)
    anchors: dict[str, tuple[Callable[[], None], Callable[[], Any], int, str]] = {
        "torch_eager": (eager, lambda: result["torch_eager"], 2 * L, "F.linear + tanh-GELU per layer, eager"),
        "torch_graph": (graph.replay, lambda: graph_out, 2 * L, "the eager loop captured in a torch CUDA graph")}
    if compile_torch:
        try:
            compiled = torch.compile(chain, mode="reduce-overhead")
            for _ in range(3):
                compiled(x)  # compile, record its graph, replay

            def run_compiled():
                result["torch_compile"] = compiled(x)
            anchors["torch_compile"] = (run_compiled, lambda: result["torch_compile"], 1,
                                        'torch.compile(mode="reduce-overhead") of the loop')
        except Exception as e:  # noqa: BLE001
            problems.append(f"{size} torch_compile: {type(e).__name__}: {e}"[:400])
    clock = Clock(lambda: torch.cuda.Event(enable_timing=True), torch.cuda.synchronize)
    steady = clock.steady([a[0] for a in anchors.values()], PASSES, REPS)
    records = []
    for (name, (launch, output, launches, about)), samples in zip(anchors.items(), steady):
        latency = clock.latency(launch, LATENCY_REPS)
        wrong = check(output().float().cpu().numpy(), ref)
        if wrong is not None:
            problems.append(f"{size} {name}: {wrong}")
        rec = record(size, name, "anchor", about, samples, latency, ceiling, launches, None)
        rec["correct"] = wrong is None
        records.append(rec)
    return records


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for decode_bench.json and the figures")
    ap.add_argument("--hidden", type=_ints, default=HIDDEN)
    ap.add_argument("--layers", type=_ints, default=LAYERS)
    ap.add_argument("--batch", type=_ints, default=BATCH)
    ap.add_argument("--budget-s", type=float, default=200.0, help="start no new size after this many seconds")
    ap.add_argument("--compile-batch", type=_ints, default=(1,), help="batches that get the torch.compile anchor")
    ap.add_argument("--compile-layers", type=_ints, default=(8,), help="layer counts that get it (each compiles anew)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    log(f"device: {device_facts().describe()}")
    ceiling = measure_copy_ceiling(1 << 28, reps=10)
    log(f"copy ceiling {ceiling.GBs:.0f} GB/s ({ceiling.best})")
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    meta = make_meta(" ".join(sys.argv), ceiling.GBs, ceiling_candidates=ceiling.candidates, torch=torch_version,
                     passes=PASSES, reps=REPS, latency_reps=LATENCY_REPS, l2_bytes=device_facts().l2_bytes,
                     sm_count=device_facts().sm_count)
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    skipped: list[str] = []
    path = args.out / "decode_bench.json"
    rng = np.random.default_rng(2026)
    loaded: dict[int, Inputs] = {}
    try:
        for size in sizes_in_order(args.hidden, args.layers, args.batch):
            if time.perf_counter() - started > args.budget_s:
                skipped.append(str(size))
                continue
            log(f"{size}")
            try:
                if size.hidden not in loaded:
                    loaded[size.hidden] = Inputs(size.hidden, max(args.layers), rng)
                compile_torch = size.batch in args.compile_batch and size.layers in args.compile_layers
                records += measure_size(size, loaded[size.hidden], ceiling.GBs, problems, compile_torch, rng)
            except Exception as e:  # noqa: BLE001  (report it; the other sizes still run)
                traceback.print_exc()
                problems.append(f"{size}: {type(e).__name__}: {e}"[:600])
            dump({**meta, "problems": problems, "skipped": skipped}, records, path)
    finally:
        dump({**meta, "problems": problems, "skipped": skipped}, records, path)
    for made in figures({"meta": meta, "records": records}, args.out):
        log(f"wrote {made}")
    print("\n".join(["", f"wrote {path}", *[f"PROBLEM: {p}" for p in problems],
                     *([f"SKIPPED (time budget): {', '.join(skipped)}"] if skipped else []), "",
                     table({"meta": meta, "records": records}), "", deficit_table({"meta": meta, "records": records}),
                     "", targets(records)]))
    return 1 if problems and not records else 0


if __name__ == "__main__":
    sys.exit(main())
