"""The first GPU run of thread-block clusters from numba (issue 36): does each piece work, and how fast is it.

    PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 -m kernels_lab.topics.softmax.cluster_probe OUT_DIR [--reps 20]

1. a cluster launch of a numba kernel through cuLaunchKernelEx (clusters.cluster_launcher): ranks, cluster
   index and size as the hardware reports them, a DSMEM load from the next block and a DSMEM store into it,
   checked against what they must be; the clusters the device holds at once (cuOccupancyMaxActiveClusters);
2. dynamic shared memory past 48 KB (the function attribute set through the driver), read across a cluster;
3. at each width (8192 .. 262144, about 256 MiB of x each): every cluster layout that fits, checked against
   float64 into poisoned outputs (rows near +100 and -120), then timed interleaved with the registered split,
   torch.softmax and the copy ceiling (measured in this run); a wrong layout is reported and not timed;
4. OUT_DIR/cluster_probe.json (command, device, date, versions; rewritten after every width) and a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from kernels_lab.clusters import (cluster_index, cluster_launcher, cluster_rank, cluster_size, cluster_sync,
                                  dsmem_load, dsmem_store, max_active_clusters)
from kernels_lab.instrument.timing import time_launchers
from kernels_lab.profile.ceiling import measure_copy_ceiling
from kernels_lab.profile.results import SCHEMA, make_meta
from kernels_lab.runtime import cuda
from kernels_lab.topics.softmax import cluster as cl
from kernels_lab.topics.softmax import split as sp
from kernels_lab.arrays import poisoned, to_device
from kernels_lab.checks import compare
from kernels_lab.core import Workload, get_workload
from kernels_lab.profile.anchors import torch_cuda
from kernels_lab.profile.study import AnchorUnavailable, windows

W = get_workload("softmax")

WIDTHS = (8192, 16384, 32768, 50257, 65536, 131072, 262144)
X_BYTES = 1 << 28          # bytes of x at every width
CHECK_ROWS = 5             # rows of the correctness check (odd; rows 0 and 1 near +100 and -120)
SLICES = (1, 2, 4, 8, 16)
THREADS = (128, 256, 512, 1024)
USEFUL = 8                 # bytes per element every GB/s counts: x read once, out written once


# -- 1. ranks and DSMEM --------------------------------------------------------------------------------

PROBE_THREADS = 64


@cuda.jit
def ranks_kernel(out):
    """out[b, t] = (rank, size, index, the next block's value read by DSMEM, the value the previous block stored)."""
    mine = cuda.shared.array(PROBE_THREADS, np.float32)
    got = cuda.shared.array(PROBE_THREADS, np.float32)
    t, b = cuda.threadIdx.x, cuda.blockIdx.x
    r, k = cluster_rank(), cluster_size()
    mine[t] = np.float32(1000 * b + t)
    cluster_sync()
    nxt = dsmem_load(mine, t, (r + 1) % k)
    dsmem_store(got, t, (r + 1) % k, np.float32(b + 0.5))
    cluster_sync()
    base = 5 * (b * PROBE_THREADS + t)
    out[base] = r
    out[base + 1] = k
    out[base + 2] = cluster_index()
    out[base + 3] = nxt
    out[base + 4] = got[t]


def probe_ranks(k: int, clusters: int) -> dict[str, Any]:
    grid = k * clusters
    out = cuda.to_device(np.full(5 * grid * PROBE_THREADS, np.nan, np.float32))
    launch = cluster_launcher(ranks_kernel, grid, PROBE_THREADS, k, (out,))
    launch()
    cuda.synchronize()
    got = out.copy_to_host().reshape(grid, PROBE_THREADS, 5)
    b = np.arange(grid)[:, None] * np.ones(PROBE_THREADS)
    t = np.ones((grid, 1)) * np.arange(PROBE_THREADS)
    rank = b % k
    nxt_block = b - rank + (rank + 1) % k
    prev_block = b - rank + (rank - 1) % k
    want = np.stack([rank, np.full_like(b, k), b // k, 1000 * nxt_block + t, prev_block + 0.5], axis=-1)
    wrong = np.argwhere(got != want)
    try:
        active: Any = max_active_clusters(launch)
    except Exception as e:  # noqa: BLE001  (an occupancy query that fails says so; the check above stands)
        active = f"{type(e).__name__}: {e}"[:300]
    return {"probe": "ranks and DSMEM", "cluster": k, "clusters": clusters, "ok": len(wrong) == 0,
            "max_active_clusters": active,
            "first_wrong": None if not len(wrong) else
            {"at": wrong[0].tolist(), "got": float(got[tuple(wrong[0])]), "want": float(want[tuple(wrong[0])])}}


# -- 2. dynamic shared memory past 48 KB ---------------------------------------------------------------

DYN_FLOATS = 40 * 1024     # 160 KB of dynamic shared memory a block


@cuda.jit
def dynamic_kernel(out, n):
    """Fill n floats of dynamic shared memory, then read the other block's (a cluster of 2) in reverse."""
    buf = cuda.shared.array(0, np.float32)
    t, b = cuda.threadIdx.x, cuda.blockIdx.x
    for i in range(t, n, cuda.blockDim.x):
        buf[i] = np.float32(i + 100000 * b)
    cluster_sync()
    other = 1 - cluster_rank()
    for i in range(t, n, cuda.blockDim.x):
        out[b * n + i] = dsmem_load(buf, n - 1 - i, other)
    cluster_sync()  # no block leaves while the other still reads its shared memory


def probe_dynamic() -> dict[str, Any]:
    out = cuda.to_device(np.full(2 * DYN_FLOATS, np.nan, np.float32))
    launch = cluster_launcher(dynamic_kernel, 2, 256, 2, (out, DYN_FLOATS), dynamic_shared=4 * DYN_FLOATS)
    launch()
    cuda.synchronize()
    got = out.copy_to_host().reshape(2, DYN_FLOATS)
    i = np.arange(DYN_FLOATS)
    want = np.stack([(DYN_FLOATS - 1 - i) + 100000.0, (DYN_FLOATS - 1 - i) + 0.0])
    return {"probe": f"dynamic shared {4 * DYN_FLOATS // 1024} KB, read across a cluster of 2",
            "ok": bool(np.array_equal(got, want)), "mismatches": int((got != want).sum())}


# -- 3. softmax: check, then time -------------------------------------------------------------------------

def check(workload: Workload, bind, size, seed: int) -> str | None:
    """One run on fresh inputs (softmax's: rows near +100 and -120) into poisoned outputs, its output against
    float64: what is wrong, or None."""
    inputs = workload.make_inputs(size, np.random.default_rng(seed))
    outputs = poisoned(workload.output_specs(size))
    bind(to_device(inputs), outputs)()
    cuda.synchronize()
    (name, want), = workload.reference(inputs).items()
    _, bad = compare(name, outputs[name].copy_to_host(), want, workload.tolerance)
    return None if bad is None else (f"{bad.bad} bad ({bad.unwritten} unwritten), first {name}{list(bad.index)}: "
                                     f"expected {bad.expected:.6g}, got {bad.got:.6g}")


def check_rows(workload: Workload, inputs: dict[str, np.ndarray], got, rng: np.random.Generator) -> str | None:
    """After timing: windows of rows (first, random, last) of the full-size output against float64 (x cut to
    the window, the other inputs whole)."""
    for window in windows(inputs["x"].shape[0], rng):
        (name, want), = workload.reference({k: v[window] if k == "x" else v for k, v in inputs.items()}).items()
        _, bad = compare(name, got(window), want, workload.tolerance)
        if bad is not None:
            return f"rows {window.start}..{window.stop - 1}: {bad.bad} bad"
    return None


def torch_or_none():
    try:
        return torch_cuda()
    except AnchorUnavailable:
        return None


def layouts(cols: int) -> list[cl.ClusterShape]:
    """Every cluster layout of a row of `cols` floats with 2 to 8 chunks a thread; the default first."""
    found = [cl.cluster_shape(cols)]
    for k in SLICES:
        for threads in THREADS:
            s = cl.cluster_shape(cols, slices=k, threads=threads)
            if s is not None and s.chunks >= 2 and s not in found:
                found.append(s)
    return [s for s in found if s is not None]


def name_of(s: cl.ClusterShape) -> str:
    return f"cluster{s.slices}_{s.threads}x{s.chunks}"


def checked_binds(cols: int, entries: list[tuple[str, Any]], check_one, problems: list[str]) -> list[tuple[str, Any]]:
    """The entries (name, bind) whose check (check_one(bind) -> what is wrong, or None) passes; the rest reported."""
    ok = []
    for name, bind in entries:
        try:
            bad = check_one(bind)
        except Exception as e:  # noqa: BLE001  (a layout that does not launch: recorded, the rest go on)
            problems.append(f"{cols}: {name}: {type(e).__name__}: {e}"[:400])
            continue
        if bad is not None:
            problems.append(f"{cols}: {name} WRONG: {bad}")
        else:
            ok.append((name, bind))
    return ok


def time_lines(workload: str, cols: int, rows: int, useful: int, lines: list[tuple[str, Any, Any]], recheck,
               ceiling: float, problems: list[str], reps: int) -> list[dict[str, Any]]:
    """lines: (name, launch, output getter) timed interleaved; each output re-checked (recheck(getter) -> what is
    wrong, or None) after timing; GB/s counts `useful` bytes per element; vs_torch: the last line's time / this."""
    timings = time_launchers([launch for _, launch, _ in lines], reps=reps)
    records = []
    for (name, _, got), t in zip(lines, timings):
        gbs = useful * rows * cols / (t.median_ms * 1e-3) / 1e9
        wrong = recheck(got)
        if wrong:
            problems.append(f"{workload} {cols}: {name} wrong after timing: {wrong}")
        records.append({"kind": "cluster_probe", "workload": workload, "cols": cols, "rows": rows, "version": name,
                        "median_ms": t.median_ms, "GBs": gbs, "of_ceiling": gbs / ceiling if ceiling else None,
                        "rechecked_ok": wrong is None})
    torch_ms = records[-1]["median_ms"] if lines and lines[-1][0].startswith("torch") else None
    for r in records:
        r["vs_torch"] = torch_ms / r["median_ms"] if torch_ms else None
    return records


def one_width(cols: int, reps: int, torch, ceiling: float, problems: list[str],
              entries: list[tuple[str, Any]] | None = None) -> list[dict[str, Any]]:
    """entries (name, bind): what to time beside torch (default: every layout, split, and the default layout on
    a persistent grid)."""
    rows = max(1, X_BYTES // (4 * cols))
    size = W.size(rows=rows, cols=cols)
    check_size = W.size(rows=CHECK_ROWS, cols=cols)
    default = cl.cluster_shape(cols) if entries is None else None
    if entries is None:
        entries = [(name_of(s) + (" (default)" if s == default else ""),
                    lambda i, o, s=s: cl.bind_cluster(i, o, shape=s)) for s in layouts(cols)]
        entries.append(("split (registered)", lambda i, o: sp.bind_split(i, o)))
    ok = checked_binds(cols, entries, lambda bind: check(W, bind, check_size, seed=cols), problems)
    x_host = W.make_inputs(size, np.random.default_rng(cols + 1))["x"]
    x = cuda.to_device(x_host)
    lines = []
    for name, bind in ok:
        out = cuda.device_array((rows, cols), np.float32)
        lines.append((name, bind({"x": x}, {"out": out}), lambda w, o=out: o[w].copy_to_host()))
    if default is not None and any(name.endswith("(default)") for name, _ in ok):  # the default on a persistent grid
        out = cuda.device_array((rows, cols), np.float32)
        active = max_active_clusters(cl.bind_cluster({"x": x}, {"out": out}))
        if active:
            lines.append((f"{name_of(default)} persistent ({active} clusters)",
                          cl.bind_cluster({"x": x}, {"out": out}, clusters=active),
                          lambda w, o=out: o[w].copy_to_host()))
    holder: dict[str, Any] = {}
    if torch is not None:
        xt = torch.as_tensor(x, device="cuda")
        lines.append(("torch.softmax", lambda: holder.__setitem__("t", torch.softmax(xt, dim=-1)),
                      lambda w: holder["t"][w].cpu().numpy()))
    rng = np.random.default_rng(7)
    return time_lines("softmax", cols, rows, USEFUL, lines, lambda got: check_rows(W, {"x": x_host}, got, rng),
                      ceiling, problems, reps)


CE = get_workload("cross_entropy")
CE_WIDTHS = (50257, 131072, 262144)


def one_ce_width(cols: int, reps: int, torch, ceiling: float, problems: list[str]) -> list[dict[str, Any]]:
    """Cross-entropy: the registered variants (cluster among them) and torch's, GB/s counting x read once."""
    rows = max(1, X_BYTES // (4 * cols))
    size = CE.size(rows=rows, cols=cols)
    entries = [(name, CE.variant(name).bind) for name in CE.variants]
    ok = checked_binds(cols, entries, lambda bind: check(CE, bind, CE.size(rows=CHECK_ROWS, cols=cols), cols), problems)
    inputs = CE.make_inputs(size, np.random.default_rng(cols + 2))
    device = to_device(inputs)
    lines = []
    for name, bind in ok:
        loss = cuda.device_array(rows, np.float32)
        lines.append((f"ce {name}", bind(device, {"loss": loss}), lambda loss=loss: loss.copy_to_host()))
    holder: dict[str, Any] = {}
    if torch is not None:
        xt, lt = torch.as_tensor(device["x"], device="cuda"), torch.as_tensor(inputs["labels"], device="cuda").long()
        lines.append(("torch cross_entropy", lambda: holder.__setitem__(
            "t", torch.nn.functional.cross_entropy(xt, lt, reduction="none")), lambda: holder["t"].cpu().numpy()))
    want = CE.reference(inputs)["loss"]

    def recheck(got) -> str | None:
        _, bad = compare("loss", got(), want, CE.tolerance)
        return None if bad is None else f"{bad.bad} bad"
    return time_lines("cross_entropy", cols, rows, 4, lines, recheck, ceiling, problems, reps)


def table(records: list[dict[str, Any]], ceiling: float) -> str:
    lines = [f"copy ceiling {ceiling:.0f} GB/s; softmax GB/s counts 8 bytes per element, cross-entropy 4 (x read)",
             f"{'cols':>7} {'rows':>6} {'version':<36} {'ms':>8} {'GB/s':>7} {'ceil':>5} {'x torch':>7}"]
    for r in records:
        vt = f"{r['vs_torch']:.2f}" if r["vs_torch"] else "-"
        lines.append(f"{r['cols']:>7} {r['rows']:>6} {r['version']:<36} {r['median_ms']:>8.3f} {r['GBs']:>7.0f} "
                     f"{r['of_ceiling']:>5.2f} {vt:>7}")
    best: dict[int, dict[str, Any]] = {}
    for r in records:
        if r["workload"] == "softmax" and r["version"].startswith("cluster") and \
                r["GBs"] > best.get(r["cols"], {}).get("GBs", 0):
            best[r["cols"]] = r
    lines.append("best softmax cluster layout per width: " + ", ".join(
        f"{c}: {r['version']} {r['of_ceiling']:.2f}" + (f" {r['vs_torch']:.2f}x torch" if r["vs_torch"] else "")
        for c, r in sorted(best.items())))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--widths", type=int, nargs="*", default=list(WIDTHS))
    ap.add_argument("--ce-widths", type=int, nargs="*", default=list(CE_WIDTHS))
    args = ap.parse_args(argv)
    start = time.time()
    path = args.out_dir / "cluster_probe.json"
    problems: list[str] = []
    probes: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    meta = make_meta(command="PYTHONPATH=$PWD KERNELS_LAB_BACKEND=gpu python3 -m kernels_lab.topics.softmax."
                             "cluster_probe " + " ".join(sys.argv[1:]))

    def save() -> None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schema": SCHEMA, "meta": meta, "probes": probes, "records": records, "problems": problems,
                                    "seconds": round(time.time() - start, 1)}, indent=1) + "\n")

    for what, fn in (("ranks k=2", lambda: probe_ranks(2, 3)), ("ranks k=4", lambda: probe_ranks(4, 5)),
                     ("ranks k=8", lambda: probe_ranks(8, 2)), ("ranks k=16", lambda: probe_ranks(16, 2)),
                     ("dynamic", probe_dynamic)):
        try:
            probes.append(fn())
        except Exception as e:  # noqa: BLE001  (each probe on its own: the run goes on)
            probes.append({"probe": what, "ok": False, "error": f"{type(e).__name__}: {e}"[:600],
                           "traceback": traceback.format_exc()[-1500:]})
        print(probes[-1], flush=True)
    save()
    ceiling = measure_copy_ceiling().GBs
    meta["ceiling_GBs"] = ceiling
    torch = torch_or_none()
    for what, widths, measure in (("", args.widths, one_width), ("cross_entropy ", args.ce_widths, one_ce_width)):
        for cols in widths:
            try:
                records += measure(cols, args.reps, torch, ceiling, problems)
            except Exception as e:  # noqa: BLE001  (a width that fails is reported, the others go on)
                problems.append(f"{what}{cols}: {type(e).__name__}: {e}"[:600] + traceback.format_exc()[-800:])
            save()
            print(f"{what}{cols} done at {time.time() - start:.0f} s", flush=True)
    print("\n".join(["problems:"] + problems) if problems else "no problems")
    for p in probes:
        print(p)
    print(table(records, ceiling))
    return 0 if not problems and all(p.get("ok") for p in probes) else 1


if __name__ == "__main__":
    sys.exit(main())
