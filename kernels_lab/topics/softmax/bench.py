"""Softmax on one GPU in one run: every kernel version validated, timed against torch and the copy ceiling.

    PYTHONPATH=$PWD python -m kernels_lab.topics.softmax.bench OUT_DIR [--reps 30] [--no-compile] [--ncu]

1. validate: every version against float64 at each width it is timed at (CHECK_ROWS rows, fresh random
   inputs with rows near +-100, poisoned outputs; split also at x * BIG); a wrong or failing version is
   reported and not timed;
2. the copy ceiling (profile.ceiling), measured in this run;
3. at each shape, every version that fits and torch.softmax / a torch.compile'd softmax (when torch
   imports) timed interleaved (instrument.timing: cold L2, medians), then rows of every output re-checked;
4. a sweep over cols at fixed bytes (SWEEP_BYTES of x) for fused, online, split and torch.softmax:
   where fused stops fitting on chip, and which variant is fastest at each width;
5. --ncu: DRAM bytes per registered variant from Nsight Compute at two shapes (does online's second
   read come from L2?);
6. OUT_DIR/softmax_bench.json (results v1; also written after steps 3 and 4, so that a run cut short
   keeps what it measured), the figures of figures.py, the targets (issue 28's among them), a table.

The versions, llm.c dev/cuda style: each is a kernel of kernels_lab/topics/softmax/workload.py (split:
softmax_split.py) at one layout, numbered, with what it changes (VERSIONS). The registered variants take the layout that
fused_shape / stream_shape / split_shape choose by width; the table says which version won each shape, so one run
tells whether those defaults are right. Every GB/s counts one read and one write of x (8 bytes per
element) for everyone, torch included; bytes_model is each version's own plan.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


import numpy as np

from kernels_lab.arrays import poisoned, to_device
from kernels_lab.checks import compare
from kernels_lab.core import Size, get_workload, kernel_name
from kernels_lab.profile.ceiling import measure_copy_ceiling
from kernels_lab.profile.results import dump, make_meta
from kernels_lab.instrument.timing import time_launchers
from kernels_lab.runtime import cuda, device_facts
from kernels_lab.topics.softmax import workload as sm
from kernels_lab.topics.softmax import split as sp

W = get_workload("softmax")
SHAPES = ((65536, 1024), (16384, 4096), (4096, 32768), (16384, 1000), (8192, 50257), (4096, 131072))
TARGET_SHAPES = SHAPES[:3]
CEILING_SHARE, CEILING_FROM = 0.85, 1024  # issue 28: the best registered variant at every width from 1024 columns
TORCH_STRETCH_COLS = (32768, 50257)       # issue 28: >= 1.2x torch.softmax there
TORCH_BEFORE = {(65536, 1024): 3966, (16384, 4096): 2541, (4096, 32768): 2627}  # GB/s, H200, 2026-12-03:
                                    # the targets' yardstick when torch is not importable in this run
SWEEP_BYTES = 1 << 28               # bytes of x at every sweep point
SWEEP_COLS = tuple(1 << k for k in range(8, 18))
CHECK_ROWS = 67                     # odd: the last block of a row-per-warp layout is partly idle
BIG = 64                            # split's second check: x scaled by this, rows near +-6400, one element ~1
USEFUL = 8                          # bytes per element every GB/s is counted on: x read once, out written once
COMPILE_BUDGET_S = 170              # torch.compile is skipped for shapes that start after this much of the run
NCU_SHAPES = ((16384, 4096), (4096, 32768))


# -- the versions ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Version:
    key: str                                         # v1 .. v19, the same at every width
    variant: str                                     # the workload variant it is a layout of
    what: str                                        # what it changes
    layout: Callable[[int], Any] | None = None       # cols -> layout (RowShape, SplitShape); None: the variant's own

    def shape(self, cols: int) -> sm.RowShape | sp.SplitShape | None:
        if self.layout is not None:
            return self.layout(cols)
        return {"fused": sm.fused_shape, "persistent": sm.fused_shape, "online": sm.stream_shape,
                "split": sp.split_shape}.get(self.variant, lambda c: None)(cols)

    def fits(self, cols: int) -> bool:
        if W.variant(self.variant).why_not(W.size(rows=1, cols=cols)) is not None:
            return False
        return self.layout is None or self.layout(cols) is not None

    def bind(self, inputs: dict, outputs: dict):
        if self.layout is None:
            return W.variant(self.variant).bind(inputs, outputs)
        if self.variant == "online":
            return sm.bind_online(inputs, outputs, shape=self.shape(inputs["x"].shape[1]))
        if self.variant == "split":
            return sp.bind_split(inputs, outputs, shape=self.shape(inputs["x"].shape[1]))
        return sm.bind_fused(inputs, outputs, shape=self.shape(inputs["x"].shape[1]))


def _block_row(chunks: int) -> Callable[[int], sm.RowShape | None]:
    """A block per row, about `chunks` chunks a thread (threads a power of two, 64 to 1024)."""
    def layout(cols: int) -> sm.RowShape | None:
        units = -(-cols // sm.CHUNK)
        return sm.fused_shape(cols, threads=min(sm.MAX_THREADS, max(64, sm._pow2(-(-units // chunks)))))
    return layout


def _half_threads(cols: int) -> sm.RowShape | None:
    threads = sm.stream_shape(cols).threads // 2
    return sm.stream_shape(cols, threads=threads) if threads >= sm.WARP else None


def _slices_of(threads: int | None, prefetch: bool = False, chunks: int = 8,
               min_cols: int | None = None) -> Callable[[int], sp.SplitShape | None]:
    """Split layouts other than the registered one: slices of `threads` x `chunks` chunks (None: the registered
    slices), with or without the prefetch, for rows of at least `min_cols` (the registered split's minimum)."""
    def layout(cols: int) -> sp.SplitShape | None:
        if cols < (sp.SPLIT_MIN_COLS if min_cols is None else min_cols):
            return None
        if threads is None:
            return sp.split_shape(cols, prefetch=prefetch)
        return sp.split_shape(cols, slices=-(-cols // (threads * chunks * sm.CHUNK)), threads=threads,
                              prefetch=prefetch)
    return layout


VERSIONS = (
    Version("v1", "fused_shared", "the exercise's answer: a block of 64 per row, the row in shared memory, "
                                  "4-byte accesses"),
    Version("v2", "fused", "registered: the row in registers, the layout fused_shape picks for the width"),
    Version("v3", "fused", "a row per warp, 2 rows a block", lambda c: sm.fused_shape(c, threads=32, block=64)),
    Version("v4", "fused", "a row per warp, 8 rows a block", lambda c: sm.fused_shape(c, threads=32, block=256)),
    Version("v5", "fused", "a block per row, 8 chunks (32 floats) a thread: fewer threads, more registers",
            _block_row(8)),
    Version("v6", "fused", "a block per row, 2 chunks a thread: more threads, 32 bytes in flight each", _block_row(2)),
    Version("v7", "fused", "a block per row, 1 chunk a thread: the most threads, 16 bytes in flight each",
            _block_row(1)),
    Version("v8", "persistent", "registered: v2's kernel on a grid of resident blocks x SMs"),
    Version("v9", "online", "registered: a block per row, 4 chunks (64 bytes) loaded together per thread"),
    Version("v10", "online", "8 chunks (128 bytes) loaded together; threads from the width",
            lambda c: sm.stream_shape(c, chunks=8)),
    Version("v11", "online", "2 chunks (32 bytes) loaded together", lambda c: sm.stream_shape(c, chunks=2)),
    Version("v12", "online", "half v9's threads, each loops twice as often", _half_threads),
    Version("v13", "unfused", "registered: 3 kernels, e = exp(x - max) through DRAM"),
    Version("v14", "split", f"registered: each row in slices of {sp.SLICE_FLOATS} floats, a block of "
                            f"{sp.SLICE_THREADS} each (bigger past {sp.WIDE_SLICES} slices), (max, sum) exchanged "
                            f"through global memory with flags"),
    Version("v15", "split", "v14 with a prefetch: the next row's slice loaded during the exchange (two slices "
                            "in registers: fewer blocks per SM)", _slices_of(None, True)),
    Version("v16", "split", "slices of 2048 floats, 128 threads x 4 chunks: more, smaller blocks",
            _slices_of(128, chunks=4, min_cols=4096)),
    Version("v17", "split", "slices of 8192 floats, 256 threads x 8 chunks", _slices_of(256)),
    Version("v18", "split", "slices of 4096 floats at every width, 128 threads x 8 chunks (up to 32 slices)",
            _slices_of(128, min_cols=4096)),
    Version("v19", "split", "slices of 4096 floats, 256 threads x 4 chunks", _slices_of(256, chunks=4,
                                                                                        min_cols=4096)),
)


def versions_for(cols: int) -> list[Version]:
    """The versions that run this width, less layouts that repeat an earlier version's."""
    chosen, seen = [], set()
    for v in VERSIONS:
        key = (v.variant, v.shape(cols)) if v.variant in ("fused", "online", "split") else (v.key,)
        if v.fits(cols) and key not in seen:
            seen.add(key)
            chosen.append(v)
    return chosen


SWEEP_KEYS = ("v2", "v9", "v14", "v16", "v18")  # the registered fused, online and split layouts; two other splits


# -- validation --------------------------------------------------------------------------------------

def check(bind: Callable[[dict, dict], Callable[[], None]], size: Size, seed: int,
          scale: float = 1.0) -> tuple[float, str | None]:
    """Run once on fresh inputs (times `scale`) into poisoned outputs; (relative error, what is wrong or None)."""
    inputs = W.make_inputs(size, np.random.default_rng(seed))
    inputs["x"] *= np.float32(scale)
    outputs = poisoned(W.output_specs(size))
    bind(to_device(inputs), outputs)()
    cuda.synchronize()
    rel, bad = compare("out", outputs["out"].copy_to_host(), W.reference(inputs)["out"], W.tolerance)
    if bad is None:
        return rel, None
    return rel, (f"{bad.bad} bad ({bad.unwritten} unwritten), first out{list(bad.index)}: expected "
                 f"{bad.expected:.6g}, got {bad.got:.6g}")


def check_rows(x_host: np.ndarray, out, rng: np.random.Generator, torch_out=None) -> str | None:
    """After timing: three 8-row windows of a full-size output (first, random, last) against float64."""
    rows = x_host.shape[0]
    for r0 in (0, int(rng.integers(0, max(1, rows - 8))), max(0, rows - 8)):
        window = slice(r0, min(rows, r0 + 8))
        got = torch_out[window].cpu().numpy() if torch_out is not None else out[window].copy_to_host()
        _, bad = compare("out", got, W.reference({"x": x_host[window]})["out"], W.tolerance)
        if bad is not None:
            return (f"rows {window.start}..{window.stop - 1}: {bad.bad} bad, expected {bad.expected:.6g} "
                    f"got {bad.got:.6g}")
    return None


# -- torch, when it imports -------------------------------------------------------------------------

def torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class Anchors:
    """torch.softmax and a torch.compile'd softmax over the same device buffer (zero copy)."""

    def __init__(self, torch, allow_compile: bool):
        self.torch, self.allow_compile = torch, allow_compile
        self.compiled = torch.compile(lambda t: torch.softmax(t, dim=-1), dynamic=False) if allow_compile else None

    def launchers(self, x_dev, compile_now: bool, problems: list[str]) -> dict[str, tuple[Callable[[], Any], dict]]:
        torch = self.torch
        xt = torch.as_tensor(x_dev, device="cuda")
        result: dict[str, Any] = {}
        found = {"torch.softmax": (lambda: result.__setitem__("torch.softmax", torch.softmax(xt, dim=-1)), result)}
        if self.compiled is not None and compile_now:
            try:
                self.compiled(xt)  # compile here, outside the timed loop
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001  (no Triton, say: the other anchors stand)
                problems.append(f"torch.compile failed, left out from here on: {type(e).__name__}: {e}"[:400])
                self.compiled = None
            else:
                found["torch.compile"] = (lambda: result.__setitem__("torch.compile", self.compiled(xt)), result)
        return found


# -- one shape: time everything interleaved ---------------------------------------------------------

def record(kind: str, size: Size, name: str, variant: str, pattern: str, what: str, t, launches: int | None,
           bytes_model: int, ceiling: float | None, **extra) -> dict[str, Any]:
    useful = USEFUL * size.elements
    gbs = useful / (t.median_ms * 1e-3) / 1e9
    return {"kind": kind, "workload": "softmax", "version": name, "variant": variant, "pattern": pattern,
            "what": what, "n": size.elements, "size": dict(size), "launches": launches, "bytes_model": bytes_model,
            "bytes_useful": useful, "time_ms": t.median_ms, "time_ms_q1": t.q1_ms, "time_ms_q3": t.q3_ms,
            "GBs": gbs, "GBs_model": bytes_model / (t.median_ms * 1e-3) / 1e9,
            "of_ceiling": gbs / ceiling if ceiling else None, "host_us_per_launch": t.host_us_per_call, **extra}


def describe(v: Version, size: Size) -> dict[str, Any]:
    """What a record says about a version's kernels: its layout, their names, its planned bytes and launches."""
    shape = v.shape(size.cols)
    # bytes and launches do not depend on the layout, but for split's exchange (its slices and grid)
    plan = sp.plan_split_for(size, shape) if v.variant == "split" else W.variant(v.variant).plan(size)
    kernels = [k.kernel for k in plan.launches]
    if v.layout is not None and v.variant != "split":
        kernels = [kernel_name(sm.online_kernel(shape) if v.variant == "online" else sm.fused_kernel(shape))]
    layout = None
    if isinstance(shape, sp.SplitShape):
        layout = {"threads": shape.threads, "chunks": shape.chunks, "block": shape.threads, "vector": True,
                  "slices": shape.slices, "prefetch": shape.prefetch, "grid": plan.launches[0].grid}
    elif shape is not None:
        layout = {"threads": shape.threads, "chunks": shape.chunks, "block": shape.block, "vector": shape.vector}
    return {"launches": plan.n_launches, "bytes_model": plan.bytes_total, "registered": v.layout is None,
            "kernels": kernels, "layout": layout}


def measure_shape(kind: str, size: Size, todo: list[Version], anchors: Anchors | None, compile_now: bool, reps: int,
                  ceiling: float | None, problems: list[str]) -> list[dict[str, Any]]:
    """Time every version (each with its own output) and the anchors interleaved, then re-check rows of each."""
    rng = np.random.default_rng(size.rows * 7 + size.cols)
    x_host = W.make_inputs(size, rng)["x"]
    x_dev = cuda.to_device(x_host)
    entries = []  # (name, launcher, our output or None, torch's result holder or None, record fields)
    for v in todo:
        try:
            out = cuda.device_array((size.rows, size.cols), np.float32)
            fields = {"variant": v.variant, "pattern": W.variant(v.variant).pattern, "what": v.what,
                      **describe(v, size)}
            entries.append((v.key, v.bind({"x": x_dev}, {"out": out}), out, None, fields))
        except Exception as e:  # noqa: BLE001  (one failing version must not end the run)
            problems.append(f"{size} {v.key}: could not bind: {type(e).__name__}: {e}")
    if anchors is not None:
        for name, (launch, holder) in anchors.launchers(x_dev, compile_now, problems).items():
            entries.append((name, launch, None, holder, {"variant": name, "pattern": "anchor", "what": "torch",
                                                        "launches": None, "bytes_model": USEFUL * size.elements,
                                                        "registered": False}))
    timings = time_launchers([e[1] for e in entries], reps=reps)
    records = []
    for (name, _, out, holder, fields), t in zip(entries, timings):
        wrong = check_rows(x_host, out, rng, holder[name] if holder is not None else None)
        if wrong:
            problems.append(f"{size} {name}: wrong after timing: {wrong}")
        records.append(record(kind, size, name, t=t, ceiling=ceiling, correct=wrong is None, **fields))
    torch_ms = next((r["time_ms"] for r in records if r["version"] == "torch.softmax"), None)
    for r in records:
        r["vs_torch"] = torch_ms / r["time_ms"] if torch_ms else None
    del entries, x_dev  # numba frees them on its own schedule (at the latest when an allocation needs room)
    if anchors is not None:
        anchors.torch.cuda.empty_cache()
    return records


# -- ncu: DRAM bytes of the registered variants ------------------------------------------------------

def ncu_bytes(records: list[dict[str, Any]], problems: list[str]) -> None:
    from kernels_lab.instrument.ncu import NcuError, measure
    for rows, cols in NCU_SHAPES:
        size = W.size(rows=rows, cols=cols)
        names = [v.name for v in W.variants.values() if v.why_not(size) is None]
        try:
            found = measure("softmax", size, names, timeout_s=300)
        except NcuError as e:
            problems.append(f"ncu at {size}: {e}")
            return
        for r in records:
            if r["size"] == dict(size) and r.get("registered") and r["variant"] in found:
                kernels = found[r["variant"]]
                r["bytes_dram_read"] = sum(k.dram_read for k in kernels)
                r["bytes_dram_write"] = sum(k.dram_write for k in kernels)


# -- the verdict --------------------------------------------------------------------------------------

ONE_KERNEL = ("fused", "persistent", "online", "split")


def best_registered(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """(kind, cols) -> the fastest correct registered variant there (its own layout, no anchors)."""
    best: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        if r.get("registered") and r.get("correct") and r["pattern"] != "anchor":
            key = (r["kind"], r["size"]["cols"])
            if key not in best or r["time_ms"] < best[key]["time_ms"]:
                best[key] = r
    return best


def targets(records: list[dict[str, Any]], ceiling: float | None) -> list[dict[str, Any]]:
    """The issue's targets, each with its value and whether it is met."""
    found = []

    def at(rows, cols, pick):
        return [r for r in records if r["kind"] == "softmax_shape" and r["size"] == {"rows": rows, "cols": cols}
                and pick(r)]

    def add(name: str, value: float | None, goal: str, met: bool | None, note: str = ""):
        found.append({"target": name, "value": value, "goal": goal, "met": met, "note": note})

    for rows, cols in TARGET_SHAPES:
        ours = at(rows, cols, lambda r: r["variant"] in ONE_KERNEL and r["correct"])
        torch = at(rows, cols, lambda r: r["version"] == "torch.softmax")
        torch_gbs = torch[0]["GBs"] if torch else TORCH_BEFORE.get((rows, cols))
        if not ours or not torch_gbs:
            add(f"one kernel vs torch.softmax at {rows}x{cols}", None, ">= 1.0x", None, "not measured")
            continue
        best = max(ours, key=lambda r: r["GBs"])
        ratio = best["GBs"] / torch_gbs
        add(f"best one-kernel version vs torch.softmax at {rows}x{cols}", ratio, ">= 1.0x", ratio >= 1.0,
            f"{best['version']} ({best['variant']}) {best['GBs']:.0f} GB/s vs torch {torch_gbs:.0f}"
            + ("" if torch else " (torch's 2026-12-03 figure: no torch in this run)"))
        if cols >= 4096:
            add(f"stretch: vs torch.softmax at {rows}x{cols}", ratio, ">= 1.2x", ratio >= 1.2)
    fused_1024 = at(65536, 1024, lambda r: r["variant"] == "fused" and r["correct"])
    if fused_1024 and ceiling:
        best = max(fused_1024, key=lambda r: r["GBs"])
        registered = next((r for r in fused_1024 if r["registered"]), best)
        add("fused at cols=1024 vs the copy ceiling", best["GBs"] / ceiling, ">= 0.90", best["GBs"] / ceiling >= 0.90,
            f"best {best['version']} {best['GBs']:.0f} GB/s, registered {registered['GBs']:.0f}, ceiling {ceiling:.0f}")
    rows, cols = 4096, 32768
    un = at(rows, cols, lambda r: r["variant"] == "unfused")
    fu = at(rows, cols, lambda r: r["variant"] == "fused" and r["registered"])
    if un and fu:
        timed, planned = un[0]["time_ms"] / fu[0]["time_ms"], un[0]["bytes_model"] / fu[0]["bytes_model"]
        add(f"unfused/fused time ratio vs planned bytes ratio at {rows}x{cols}", timed / planned, "within 15%",
            abs(timed / planned - 1) <= 0.15, f"time {timed:.2f}x, bytes {planned:.2f}x")
    sp_ = at(rows, cols, lambda r: r["variant"] == "split" and r["registered"])
    if un and sp_:
        timed, planned = un[0]["time_ms"] / sp_[0]["time_ms"], un[0]["bytes_model"] / sp_[0]["bytes_model"]
        add(f"unfused/split time ratio vs planned bytes ratio at {rows}x{cols}", timed / planned, "within 15%",
            abs(timed / planned - 1) <= 0.15, f"time {timed:.2f}x, bytes {planned:.2f}x (split: the one-pass kernel "
                                              f"that keeps this row on chip)")
    best = best_registered(records)
    if ceiling:
        wide = {key: r for key, r in best.items() if key[1] >= CEILING_FROM}
        for (kind, cols), r in sorted(wide.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            share = r["GBs"] / ceiling
            add(f"best registered variant vs the copy ceiling, {r['size']['rows']}x{cols} ({kind[8:]})", share,
                f">= {CEILING_SHARE}", share >= CEILING_SHARE, f"{r['variant']} ({r['version']}) {r['GBs']:.0f} GB/s")
    for cols in TORCH_STRETCH_COLS:
        r = best.get(("softmax_shape", cols))
        if r is None or not r.get("vs_torch"):
            add(f"best registered variant vs torch.softmax at {cols} columns", None, ">= 1.2x", None, "not measured")
            continue
        add(f"best registered variant vs torch.softmax at {r['size']['rows']}x{cols}", r["vs_torch"], ">= 1.2x",
            r["vs_torch"] >= 1.2, f"{r['variant']} ({r['version']}) {r['GBs']:.0f} GB/s")
    return found


def winners(records: list[dict[str, Any]]) -> list[str]:
    """Per shape: the fastest version of each variant family against the registered one."""
    lines = []
    for rows, cols in SHAPES:
        here = [r for r in records if r["kind"] == "softmax_shape" and r["size"] == {"rows": rows, "cols": cols}
                and r.get("correct")]
        for family in ("fused", "online", "split"):
            mine = [r for r in here if r["variant"] == family]
            if not mine:
                continue
            best, reg = min(mine, key=lambda r: r["time_ms"]), next((r for r in mine if r["registered"]), None)
            if reg is not None and best is not reg:
                lines.append(f"{rows}x{cols} {family}: {best['version']} ({layout_text(best['layout'])}) beats the "
                             f"registered layout ({layout_text(reg['layout'])}) by "
                             f"{reg['time_ms'] / best['time_ms']:.2f}x")
    return lines


def layout_text(layout: dict[str, Any] | None) -> str:
    """[k slices of] threads per row x chunks per thread, threads per block; 's' = 4-byte accesses;
    'pf' = the next row's slice loaded during the exchange."""
    if not layout:
        return "-"
    slices = f"k{layout['slices']} " if "slices" in layout else ""
    ahead = " pf" if layout.get("prefetch") else ""
    return f"{slices}{layout['threads']}x{layout['chunks']} b{layout['block']}{'' if layout['vector'] else ' s'}{ahead}"


def table(records: list[dict[str, Any]]) -> str:
    head = (f"{'shape':>12}  {'version':<15}{'variant':<14}{'layout':<15}{'ms':>8}{'GB/s':>7}{'vs torch':>9}"
            f"{'of ceil':>8}")
    lines = [head, "-" * len(head)]
    for r in records:
        if r["kind"] != "softmax_shape":
            continue
        vs = f"{r['vs_torch']:.2f}x" if r.get("vs_torch") else "-"
        ceil = f"{r['of_ceiling']:.0%}" if r.get("of_ceiling") else "-"
        flag = "" if r.get("correct", True) else "  WRONG"
        lines.append(f"{r['size']['rows']:>6}x{r['size']['cols']:<5}  {r['version']:<15}{r['variant']:<14}"
                     f"{layout_text(r.get('layout')):<15}{r['time_ms']:8.3f}{r['GBs']:7.0f}{vs:>9}{ceil:>8}{flag}")
    return "\n".join(lines)


# -- the run ------------------------------------------------------------------------------------------

def validate(todo: dict[int, list[Version]], problems: list[str]) -> tuple[list[dict[str, Any]], set]:
    """Every version at every width it is timed at: the checks, and the (version, cols) that passed."""
    checks, passed = [], set()
    for cols, versions in todo.items():
        size = W.size(rows=CHECK_ROWS, cols=cols)
        for v in versions:
            big_rel = None
            try:
                rel, wrong = check(v.bind, size, seed=cols + int(v.key[1:]))
                if wrong is None and v.variant == "split":  # the kernel whose blocks combine partial maxima
                    big_rel, wrong = check(v.bind, size, seed=cols + int(v.key[1:]) + 1, scale=BIG)
                    wrong = wrong and f"x * {BIG}: {wrong}"
            except Exception as e:  # noqa: BLE001  (a compile or launch failure is a finding, not the end)
                rel, wrong = None, f"{type(e).__name__}: {e}"
                traceback.print_exc()
            checks.append({"version": v.key, "variant": v.variant, "size": dict(size), "max_rel_err": rel,
                           "max_rel_err_big": big_rel, "ok": wrong is None, "problem": wrong})
            if wrong is None:
                passed.add((v.key, cols))
            else:
                problems.append(f"{size} {v.key} ({v.variant}) WRONG: {wrong}")
            print(f"   {str(size):<22} {v.key:<4} {v.variant:<13} " +
                  ("ok" + (f" (rel err {rel:.1e})" if rel is not None else "") if wrong is None else "WRONG " + wrong),
                  flush=True)
    return checks, passed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile anchor (its compiles take time)")
    ap.add_argument("--ncu", action="store_true", help="also measure DRAM bytes with Nsight Compute (ncu on PATH)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    facts = device_facts()
    print(f"device: {facts.describe()}", flush=True)
    problems: list[str] = []

    todo = {cols: versions_for(cols) for _, cols in SHAPES}
    for cols in SWEEP_COLS:
        todo.setdefault(cols, [v for v in versions_for(cols) if v.key in SWEEP_KEYS])
    print(f"1. validating every version at {CHECK_ROWS} rows, widths {list(todo)}", flush=True)
    checks, passed = validate(todo, problems)

    print(f"2. copy ceiling ({time.monotonic() - t0:.0f} s)", flush=True)
    c = measure_copy_ceiling(n=1 << 28)
    ceiling = c.GBs
    print(f"   {ceiling:.0f} GB/s ({c.best})", flush=True)

    torch = torch_or_none()
    anchors = Anchors(torch, not args.no_compile) if torch is not None else None
    records: list[dict[str, Any]] = []

    def save() -> Path:
        """The results so far, written again after each stage: a run cut short keeps what it measured."""
        meta = make_meta(" ".join(["python3", *sys.argv]), ceiling_GBs=ceiling, ceiling_candidates=c.candidates,
                         gbs_counts="one read + one write of x (8 bytes per element), for every version and anchor",
                         checks=checks, targets=targets(records, ceiling), problems=problems,
                         seconds=round(time.monotonic() - t0, 1), torch=torch.__version__ if torch else None)
        return dump(meta, records, args.out_dir / "softmax_bench.json")

    print(f"   torch: {'torch ' + torch.__version__ if torch else 'not importable: no anchors'}", flush=True)
    for rows, cols in SHAPES:
        size = W.size(rows=rows, cols=cols)
        timed = [v for v in todo[cols] if (v.key, cols) in passed]
        compile_now = time.monotonic() - t0 < COMPILE_BUDGET_S
        print(f"3. {size}: {', '.join(v.key for v in timed)}{' + torch' if anchors else ''} "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
        if anchors is not None and anchors.allow_compile and not compile_now:
            problems.append(f"{size}: torch.compile skipped (past {COMPILE_BUDGET_S} s)")
        records += measure_shape("softmax_shape", size, timed, anchors, compile_now, args.reps, ceiling, problems)
    save()

    print(f"4. sweep over cols at {SWEEP_BYTES >> 20} MiB of x ({time.monotonic() - t0:.0f} s)", flush=True)
    sweep_anchor = Anchors(torch, False) if torch is not None else None
    for cols in SWEEP_COLS:
        size = W.size(rows=SWEEP_BYTES // (4 * cols), cols=cols)
        timed = [v for v in todo[cols] if v.key in SWEEP_KEYS and (v.key, cols) in passed]
        records += measure_shape("softmax_sweep", size, timed, sweep_anchor, False, max(10, args.reps // 2), ceiling,
                                 problems)
    save()

    if args.ncu:
        print(f"5. ncu ({time.monotonic() - t0:.0f} s)", flush=True)
        if shutil.which("ncu"):
            ncu_bytes(records, problems)
        else:
            problems.append("ncu is not on PATH: no DRAM bytes")

    found = targets(records, ceiling)
    path = save()
    figures = []
    try:
        from kernels_lab.profile.results import load
        from kernels_lab.topics.softmax.figures import figures as draw
        figures = draw(load(path), args.out_dir)
    except Exception as e:  # noqa: BLE001  (the data is written; a figure problem is reported)
        problems.append(f"figures: {type(e).__name__}: {e}")

    print(f"\nwrote {path}" + "".join(f", {f}" for f in figures))
    for line in winners(records):
        print("layout:", line)
    for p in problems:
        print("PROBLEM:", p)
    for t in found:
        mark = {True: "MET ", False: "MISS", None: "----"}[t["met"]]
        value = f"{t['value']:.2f}" if t["value"] is not None else "-"
        print(f"{mark} {t['target']}: {value} (goal {t['goal']}) {t['note']}")
    print(f"({time.monotonic() - t0:.0f} s in all)\n")
    print(table(records))
    return 1 if any(not ch["ok"] for ch in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
