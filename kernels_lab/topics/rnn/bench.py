"""The RNN h_t = tanh(W h_{t-1} + u_t) on one GPU in one run: every variant checked and timed.

    PYTHONPATH=$PWD python -m kernels_lab.topics.rnn.bench OUT_DIR [--reps 20] [--steps 512]

For hidden in (1024, 2048) and batch in (1, 4, 32), STEPS steps:
1. every registered variant (unfused, fused, graph, persistent and its barrier comparison) is run
   once on fresh inputs into poisoned outputs and checked against float64 over all steps; a wrong
   or failing one is reported and not timed;
2. at batch 4 also the persistent kernel's numbered tilings (rnn.TILINGS, llm.c dev/cuda style,
   each saying what it changes) with the registered barrier: one run tells which tiling to keep;
3. the variants that passed are timed interleaved (profile.measure: cold L2, medians) and re-checked;
4. anchors, when torch imports: torch.nn.RNN (cuDNN; tanh, no bias, identity input weights so that
   u is the input projection: cuDNN also pays that T x batch x hidden^2 GEMM), an eager loop of
   addmm + tanh, and that loop captured in a torch CUDA graph; checked against float64 too;
5. OUT_DIR/rnn_bench.json (results v1: every record has us_per_step and tflops = 2 hidden^2 batch
   per step over the time), the figures of figures.py, and a table with the targets.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import traceback
from pathlib import Path
from typing import Any


import numpy as np

from kernels_lab.arrays import poisoned, to_device
from kernels_lab.checks import compare
from kernels_lab.core import Size, Variant, get_workload
from kernels_lab.topics.rnn.demo import per_step
from kernels_lab.topics.rnn.figures import figures
from kernels_lab.profile.measure import measure_workload
from kernels_lab.profile.results import dump, make_meta
from kernels_lab.instrument.timing import time_launchers
from kernels_lab.runtime import cuda, device_facts
from kernels_lab.topics.rnn import workload as rnn

W = get_workload("rnn")
HIDDEN = (1024, 2048)
BATCH = (1, 4, 32)
TILING_BATCH = 4
# us per step on this H200, 2026-12-03 (anchors.md): the targets' yardstick when torch does not import
BEFORE = {(1024, 4): {"torch_graph": 7.5, "torch_cudnn": 18.7}, (2048, 4): {"torch_graph": 11.9, "torch_cudnn": 18.6}}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- what runs at one size ------------------------------------------------------------------------

def tiling_versions() -> dict[str, Variant]:
    """The numbered tilings other than the registered one, with the registered barrier."""
    return {f"persistent_{key}": rnn.persistent_variant(f"persistent_{key}", rnn.PERSISTENT_BARRIER, tiling,
                                                        about=f"{key}: {tiling.about}")
            for key, tiling in rnn.TILINGS.items() if key != rnn.GPU_TILING}


def check(variant: Variant, size: Size, inputs: dict, ref: np.ndarray) -> str | None:
    """Run once into poisoned outputs; None when every step matches float64, else what is wrong."""
    outputs = poisoned(W.output_specs(size))
    variant.bind(to_device(inputs), outputs)()
    cuda.synchronize()
    _, bad = compare("h", outputs["h"].copy_to_host(), ref, W.tolerance)
    if bad is None:
        return None
    return (f"{bad.bad} bad ({bad.unwritten} unwritten), first h{list(bad.index)}: expected {bad.expected:.6g}, "
            f"got {bad.got:.6g}")


def kernel_resources(name: str, size: Size) -> dict[str, Any]:
    """Tiling, blocks, registers and local memory per thread of a persistent variant's kernel
    (local memory > 0: W did not stay in registers)."""
    version = name.removeprefix("persistent_")
    if name not in rnn.PERSISTENT_VARIANTS and version not in rnn.TILINGS:
        return {}
    tiling = rnn.TILINGS.get(version, rnn.default_tiling())
    barrier = rnn.PERSISTENT_VARIANTS.get(name, rnn.PERSISTENT_BARRIER)
    lay = rnn.make_layout(size.hidden, size.batch, tiling, rnn.max_resident_blocks(tiling))
    compiled = list(rnn.persistent_kernel(lay, barrier).overloads.values())
    found = {"barrier": barrier, "blocks": lay.blocks, "threads": tiling.threads,
             "tiling": dataclasses.asdict(tiling)}
    if compiled:
        found.update(regs_per_thread=compiled[0].regs_per_thread,
                     local_bytes_per_thread=compiled[0].local_mem_per_thread)
    return found


def measure_size(size: Size, reps: int, problems: list[str]) -> list[dict[str, Any]]:
    extra = tiling_versions() if size.batch == TILING_BATCH else {}
    view = dataclasses.replace(W, variants={**W.variants, **extra}, exercises={})
    inputs = W.make_inputs(size, np.random.default_rng(0))  # measure_workload's inputs (seed 0)
    ref = W.reference(inputs)["h"]
    passing = []
    for name, variant in view.variants.items():
        if (why := variant.why_not(size)) is not None:
            problems.append(f"{size} {name}: not run: {why}")
            continue
        t0 = time.perf_counter()
        try:
            wrong = check(variant, size, inputs, ref)
        except Exception as e:  # noqa: BLE001  (one broken variant must not cost the others' figures)
            wrong = f"{type(e).__name__}: {e}"[:600]
            traceback.print_exc()
        log(f"  {size} {name}: {'ok' if wrong is None else 'WRONG ' + wrong} ({time.perf_counter() - t0:.1f} s, "
            f"with compiling)")
        if wrong is None:
            passing.append(name)
        else:
            problems.append(f"{size} {name}: {wrong}")
    records = measure_workload(view, size, passing, reps=reps, show_progress=False) if passing else []
    for r in records:
        variant = view.variant(r["variant"])
        r.update(kind="rnn", about=variant.about, **per_step(r), **kernel_resources(r["variant"], size))
        if r["variant"] in extra:
            r["version"] = r["variant"].removeprefix("persistent_")
    return records + torch_anchors(size, inputs, ref, reps, problems)


# -- anchors ---------------------------------------------------------------------------------------

def torch_anchors(size: Size, inputs: dict, ref: np.ndarray, reps: int, problems: list[str]) -> list[dict]:
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    H, T = size.hidden, size.steps
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # float32, as ours
    weights = torch.as_tensor(inputs["W"], device=dev)
    u = torch.as_tensor(inputs["u"], device=dev)
    out, z, h0 = torch.empty_like(u), torch.empty_like(u[0]), torch.zeros_like(u[0])
    weights_t = weights.t().contiguous()

    def eager():
        h = h0
        for t in range(T):
            torch.addmm(u[t], h, weights_t, out=z)  # z = u_t + h_{t-1} W^T (rows of h are batch columns)
            torch.tanh(z, out=out[t])
            h = out[t]

    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager()  # warm up (cuBLAS picks its kernels) outside the capture
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        eager()
    cudnn = torch.nn.RNN(H, H, nonlinearity="tanh", bias=False).to(dev)
    with torch.no_grad():
        cudnn.weight_ih_l0.copy_(torch.eye(H, device=dev))  # x_t = u_t: the input projection is given
        cudnn.weight_hh_l0.copy_(weights)
    cudnn_out: list = []

    def run_cudnn():
        with torch.no_grad():
            cudnn_out[:] = [cudnn(u, h0[None])[0]]

    anchors = {"torch_eager": (eager, lambda: out, 2 * T, "addmm + tanh per step, eager"),
               "torch_graph": (graph.replay, lambda: out, 2 * T, "the eager loop captured in a torch CUDA graph"),
               "torch_cudnn": (run_cudnn, lambda: cudnn_out[0], 1,
                               "torch.nn.RNN (cuDNN), identity input weights: includes a T x batch x hidden^2 "
                               "input GEMM")}
    timings = time_launchers([a[0] for a in anchors.values()], reps=reps)
    records = []
    for (name, (_, result, launches, about)), t in zip(anchors.items(), timings):
        torch.cuda.synchronize()
        _, bad = compare("h", result().float().cpu().numpy(), ref, W.tolerance)
        if bad is not None:
            problems.append(f"{size} {name}: {bad.bad} elements off float64 (first h{list(bad.index)}: expected "
                            f"{bad.expected:.6g}, got {bad.got:.6g}): cuDNN/cuBLAS may use TF32")
        rec = {"kind": "rnn", "workload": "rnn", "variant": name, "pattern": "anchor", "n": size.elements,
               "size": dict(size), "launches": launches, "bytes_model": None, "time_ms": t.median_ms,
               "time_ms_q1": t.q1_ms, "time_ms_q3": t.q3_ms, "GBs": None, "host_us_per_launch": None,
               "about": about, "correct": bad is None}
        records.append({**rec, **per_step(rec)})
    return records


# -- the report ------------------------------------------------------------------------------------

def table(records: list[dict[str, Any]]) -> str:
    lines = []
    for hidden, batch in sorted({(r["size"]["hidden"], r["size"]["batch"]) for r in records}):
        here = [r for r in records if r["size"]["hidden"] == hidden and r["size"]["batch"] == batch]
        lines.append(f"hidden {hidden}, batch {batch}: us per step (TFLOP/s), vs torch graph / cuDNN")
        base = {**BEFORE.get((hidden, batch), {}),
                **{r["variant"]: r["us_per_step"] for r in here if r["pattern"] == "anchor"}}
        for r in sorted(here, key=lambda r: r["us_per_step"] or float("inf")):
            step = r["us_per_step"]
            if step is None:
                lines.append(f"  {r['variant']:<22}      n/a (not timed)")
                continue
            vs = " / ".join(f"{base[a] / step:.2f}x" if a in base else "-" for a in ("torch_graph", "torch_cudnn"))
            extra = f"  regs {r['regs_per_thread']}, local {r['local_bytes_per_thread']} B" \
                if "regs_per_thread" in r else ""
            lines.append(f"  {r['variant']:<22} {step:8.2f} us ({r['tflops']:5.2f})  {vs}{extra}")
    return "\n".join(lines)


def targets(records: list[dict[str, Any]]) -> str:
    """The issue's targets at batch 4: persistent >= 2.5x the torch graph loop and >= 5x cuDNN per step,
    and >= 7 TFLOP/s (stretch 10) at hidden 2048."""
    lines = []
    for hidden in HIDDEN:
        here = {r["variant"]: r for r in records if r["size"]["hidden"] == hidden and r["size"]["batch"] == 4}
        if here.get("persistent", {}).get("us_per_step") is None:
            lines.append(f"hidden {hidden}, batch 4: persistent not timed")
            continue
        p = here["persistent"]["us_per_step"]
        base = {**BEFORE.get((hidden, 4), {}), **{k: v["us_per_step"] for k, v in here.items()
                                                  if v["pattern"] == "anchor"}}
        for anchor, want in (("torch_graph", 2.5), ("torch_cudnn", 5.0)):
            if anchor in base:
                got = base[anchor] / p
                lines.append(f"hidden {hidden}: persistent {p:.2f} us/step = {got:.2f}x {anchor} ({base[anchor]:.2f}); "
                             f"target {want}x: {'MET' if got >= want else 'missed'}")
        if hidden == 2048:
            tf = here["persistent"]["tflops"]
            lines.append(f"hidden 2048: {tf:.2f} TFLOP/s; target 7 (stretch 10): {'MET' if tf >= 7 else 'missed'}")
        best = min((r for r in here.values() if r["pattern"] == "persistent"), key=lambda r: r["us_per_step"])
        lines.append(f"hidden {hidden}: fastest persistent version {best['variant']} ({best['us_per_step']:.2f} us)")
    return "\n".join(lines)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for rnn_bench.json and the figures")
    ap.add_argument("--reps", type=int, default=20, help="timed repetitions per variant and size")
    ap.add_argument("--steps", type=int, default=512)
    ap.add_argument("--hidden", type=_ints, default=HIDDEN, help="comma-separated (default 1024,2048)")
    ap.add_argument("--batch", type=_ints, default=BATCH, help="comma-separated (default 1,4,32)")
    args = ap.parse_args(argv)
    log(f"device: {device_facts().describe()}; persistent barrier {rnn.PERSISTENT_BARRIER}, tiling {rnn.GPU_TILING}")
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    meta = make_meta(" ".join(sys.argv), None, steps=args.steps, persistent_barrier=rnn.PERSISTENT_BARRIER,
                     tiling=rnn.GPU_TILING, tilings={k: t.about for k, t in rnn.TILINGS.items()})
    path = args.out / "rnn_bench.json"
    try:
        for hidden in args.hidden:
            for batch in sorted(args.batch, key=lambda b: b != TILING_BATCH):  # the tilings' batch first
                size = W.size(hidden=hidden, batch=batch, steps=args.steps)
                log(f"{size}")
                try:
                    records += measure_size(size, args.reps, problems)
                except Exception as e:  # noqa: BLE001  (report it; the other sizes still run)
                    traceback.print_exc()
                    problems.append(f"{size}: {type(e).__name__}: {e}"[:600])
                dump({**meta, "problems": problems}, records, path)  # after every size: a crash keeps the rest
    finally:
        dump({**meta, "problems": problems}, records, path)
    for made in figures({"meta": meta, "records": records}, args.out):
        log(f"wrote {made}")
    print("\n".join(["", f"wrote {path}", *[f"PROBLEM: {p}" for p in problems], "", table(records), "",
                     targets(records)]))
    return 1 if problems and not records else 0


if __name__ == "__main__":
    sys.exit(main())
