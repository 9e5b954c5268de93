"""Registers per thread and resident blocks per SM of every layernorm kernel on sm_90 (H100, H200), from the
compiled kernels, with no GPU: numba's compiler makes the PTX (cuda.compile_ptx, cc 9.0, the kernels' own
fastmath and launch bounds) and `ptxas -arch=sm_90 -v` says what each thread uses. Lesson 08 reads the committed
file beside the measured fractions of the copy ceiling:

    KERNELS_LAB_BACKEND=ptx python -m kernels_lab.topics.layernorm.registers figures/data/compiled/layernorm_registers_sm90.json

Occupancy follows the CUDA occupancy calculator's rules for compute capability 9.0: 65536 registers an SM,
allocated per warp in units of 256; at most 2048 threads and 32 blocks an SM; 228 KiB of shared memory an SM,
1 KiB of it reserved per block. A cluster kernel's blocks must also be co-scheduled on one GPC, which this
per-SM count does not model.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .study import SHAPES
from ..softmax.cluster import cluster_shape
from .cluster import layernorm_cluster_kernel
from .workload import fused_kernel, fused_shape, stream_shape, unfused_kernels

ARCH = "sm_90"
REGISTERS_PER_SM, REGISTER_UNIT, THREADS_PER_SM, BLOCKS_PER_SM = 65536, 256, 2048, 32
SHARED_PER_SM, SHARED_RESERVED = 228 * 1024, 1024


def _signature(kernel: Any) -> tuple:
    """The argument types the kernel is launched with (workload.bind_*): flat float32 arrays, int64s, a float32."""
    from numba import types
    arr = types.Array(types.float32, 1, "C")
    by_name = {"x": arr, "rmean": arr, "rrstd": arr, "gamma": arr, "beta": arr, "out": arr,
               "rows": types.int64, "cols": types.int64, "slice_vectors": types.int64, "eps": types.float32}
    names = kernel.py_func.__code__.co_varnames[:kernel.py_func.__code__.co_argcount]
    return tuple(by_name[n] for n in names)


def usage(kernel: Any, block: int) -> dict[str, Any]:
    """ptxas's count for `kernel` compiled as the variants compile it: registers, spill stores, shared memory."""
    from ...capabilities import compile_ptx
    ptx = compile_ptx(kernel.py_func, _signature(kernel), (9, 0), fastmath=True, launch_bounds=block)
    said, isa = _assemble(ptx), re.search(r"^\.version ([\d.]+)", ptx, re.M).group(1)
    older = re.search(r"Unsupported \.version [\d.]+; current version is '([\d.]+)'", said)
    if older:  # numba's NVVM may write a newer PTX ISA than this ptxas reads: these kernels use nothing newer
        isa = f"{older.group(1)} (NVVM wrote {isa})"
        said = _assemble(re.sub(r"^\.version [\d.]+", f".version {older.group(1)}", ptx, count=1, flags=re.M))
    registers = re.search(r"Used (\d+) registers", said)
    if registers is None:
        raise RuntimeError(f"ptxas -v said no register count for {kernel.py_func.__name__}:\n{said}")
    spills = re.search(r"(\d+) bytes spill stores", said)
    smem = re.search(r"(\d+) bytes smem", said)
    return {"registers": int(registers.group(1)), "spill_bytes": int(spills.group(1)) if spills else 0,
            "shared_bytes": int(smem.group(1)) if smem else 0, "ptx_isa": isa}


def _assemble(ptx: str) -> str:
    """What `ptxas -arch=sm_90 -v` says of the PTX (its stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        return subprocess.run(["ptxas", f"-arch={ARCH}", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                              capture_output=True, text=True).stderr


def blocks_per_sm(registers: int, threads: int, shared: int) -> tuple[int, str]:
    """Resident blocks an sm_90 SM holds, and what limits it (every limit that allows no more)."""
    per_warp = -(-registers * 32 // REGISTER_UNIT) * REGISTER_UNIT
    limits = {"registers": REGISTERS_PER_SM // (per_warp * -(-threads // 32)),
              "threads": THREADS_PER_SM // threads, "blocks": BLOCKS_PER_SM,
              "shared memory": SHARED_PER_SM // (shared + SHARED_RESERVED)}
    most = min(limits.values())
    return most, " and ".join(k for k, v in limits.items() if v == most)


def kernels_at(cols: int) -> list[tuple[str, Any, int, float]]:
    """(variant: kernel, the kernel, its block, rows a block works on at once) for every kernel the variants launch
    at this width (a cluster's blocks share a row: 1 / blocks of the cluster)."""
    stream = stream_shape(cols)
    found = [(f"unfused: {k.py_func.__name__.split('_', 1)[1].rsplit('_', 2)[0]}", k, stream.block, 1.0)
             for k in unfused_kernels(stream)]
    shape = fused_shape(cols)
    if shape is not None:
        found += [("fused", fused_kernel(shape), shape.block, shape.rows_per_block),
                  ("persistent", fused_kernel(shape, hold=True), shape.block, shape.rows_per_block)]
    clustered = cluster_shape(cols)
    if clustered is not None:
        found.append(("cluster", layernorm_cluster_kernel(clustered), clustered.threads, 1 / clustered.slices))
    return found


def table() -> list[dict[str, Any]]:
    rows = []
    for size in SHAPES:
        for variant, kernel, block, rows_per_block in kernels_at(size.cols):
            used = usage(kernel, block)
            resident, limit = blocks_per_sm(used["registers"], block, used["shared_bytes"])
            rows.append({"size": {"rows": size.rows, "cols": size.cols}, "variant": variant,
                         "kernel": kernel.py_func.__name__, "threads": block, **used, "blocks_per_sm": resident,
                         "limited_by": limit, "rows_per_sm": resident * rows_per_block,
                         "threads_per_sm": resident * block, "occupancy": resident * block / THREADS_PER_SM})
    return rows


def _version(package: str) -> str:
    from importlib.metadata import version
    return version(package)


def main(out: str) -> None:
    import numba
    from ...backend import BACKEND
    if BACKEND.can_launch:  # only the PTX-only back-end compiles with numba's real compiler and launches nothing
        raise SystemExit("run with KERNELS_LAB_BACKEND=ptx: numba's real compiler, no GPU needed")
    ptxas = subprocess.run(["ptxas", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    rows = table()
    doc = {"meta": {"command": f"KERNELS_LAB_BACKEND=ptx python -m kernels_lab.topics.layernorm.registers {out}",
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "arch": ARCH,
                    "versions": {"numba": numba.__version__, "numba-cuda": _version("numba-cuda"), "ptxas": ptxas, "python": sys.version.split()[0]}},
           "records": rows}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        print(f"{r['size']['rows']:>6} x {r['size']['cols']:<5} {r['variant']:<16} {r['threads']:>5} threads "
              f"{r['registers']:>4} registers  {r['blocks_per_sm']:>2} blocks/SM ({r['limited_by']}), "
              f"occupancy {r['occupancy']:.0%}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
