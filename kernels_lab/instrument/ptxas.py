"""What ptxas says of a kernel compiled for sm_90 (H100, H200), with no GPU: numba's compiler makes the PTX
(capabilities.compile_ptx, cc 9.0, the kernel's own fastmath and launch bound) and `ptxas -arch=sm_90 -v` counts
its registers, spills and shared memory; `blocks_per_sm` turns them into resident blocks.

Occupancy follows the CUDA occupancy calculator's rules for compute capability 9.0: 65536 registers an SM,
allocated per warp in units of 256; at most 2048 threads and 32 blocks an SM; 228 KiB of shared memory an SM,
1 KiB of it reserved per block. A cluster kernel's blocks must also be co-scheduled on one GPC, which this
per-SM count does not model.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

ARCH = "sm_90"
REGISTERS_PER_SM, REGISTER_UNIT, THREADS_PER_SM, BLOCKS_PER_SM = 65536, 256, 2048, 32
SHARED_PER_SM, SHARED_RESERVED = 228 * 1024, 1024


@functools.lru_cache(maxsize=None)
def usage(kernel: Any, signature: tuple, block: int) -> dict[str, Any]:
    """ptxas's count for a @cuda.jit kernel compiled as the variants compile it (fastmath, its own launch bound, by
    default the block): registers, spill stores, shared memory, the PTX ISA it was assembled as. Once per kernel:
    the sizes of a table that launch the same kernel share its count."""
    from ..capabilities import compile_ptx
    bounds = kernel.targetoptions.get("launch_bounds") or block
    ptx = compile_ptx(kernel.py_func, signature, (9, 0), fastmath=True, launch_bounds=bounds)
    said, isa = assemble(ptx), re.search(r"^\.version ([\d.]+)", ptx, re.M).group(1)
    older = re.search(r"Unsupported \.version [\d.]+; current version is '([\d.]+)'", said)
    if older:  # numba's NVVM may write a newer PTX ISA than this ptxas reads: these kernels use nothing newer
        isa = f"{older.group(1)} (NVVM wrote {isa})"
        said = assemble(re.sub(r"^\.version [\d.]+", f".version {older.group(1)}", ptx, count=1, flags=re.M))
    registers = re.search(r"Used (\d+) registers", said)
    if registers is None:
        raise RuntimeError(f"ptxas -v said no register count for {kernel.py_func.__name__}:\n{said}")
    spills = re.search(r"(\d+) bytes spill stores", said)
    smem = re.search(r"(\d+) bytes smem", said)
    return {"registers": int(registers.group(1)), "spill_bytes": int(spills.group(1)) if spills else 0,
            "shared_bytes": int(smem.group(1)) if smem else 0, "ptx_isa": isa}


def assemble(ptx: str) -> str:
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


def ptxas_version() -> str:
    return subprocess.run(["ptxas", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]


def kernel_row(size: Any, variant: str, py_func: Callable, block: int, counts: dict[str, Any],
               dynamic_shared: int = 0) -> dict[str, Any]:
    """One table row: where (a size's rows and cols, the variant), the kernel, ptxas's `counts` (usage()) and the
    blocks an SM holds with what limits them (its static shared memory, plus `dynamic_shared` bytes a launch
    gives each block)."""
    resident, limit = blocks_per_sm(counts["registers"], block, counts["shared_bytes"] + dynamic_shared)
    extra = {"dynamic_shared_bytes": dynamic_shared} if dynamic_shared else {}
    return {"size": {"rows": size.rows, "cols": size.cols}, "variant": variant, "kernel": py_func.__name__,
            "threads": block, **counts, **extra, "blocks_per_sm": resident, "limited_by": limit}


def write_table(out: str, module: str, table: Callable[[], list[dict[str, Any]]], line: Callable[[dict], str],
                **meta: Any) -> None:
    """Run `table` (compiling through ptxas), write its rows to `out` with where they came from (the command,
    `python -m MODULE OUT` on the PTX-only back-end; the date, the arch, the compilers' versions) and print
    `line(row)` for each."""
    import numba
    from importlib.metadata import version
    from ..backend import BACKEND
    if BACKEND.can_launch:  # only the PTX-only back-end compiles with numba's real compiler and launches nothing
        raise SystemExit("run with KERNELS_LAB_BACKEND=ptx: numba's real compiler, no GPU needed")
    rows = table()
    doc = {"meta": {"command": f"KERNELS_LAB_BACKEND=ptx python -m {module} {out}",
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "arch": ARCH, **meta,
                    "versions": {"numba": numba.__version__, "numba-cuda": version("numba-cuda"),
                                 "ptxas": ptxas_version(), "python": sys.version.split()[0]}},
           "records": rows}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    for row in rows:
        print(line(row))
